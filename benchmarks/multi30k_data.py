"""The `--data` flag of the decode benchmarks: the Multi30k folder whose
text trains their tokenizers and gives their test sentences.

TensorFlow-free, so that a script's `--help` stays fast.
"""


def add_data_argument(parser):
    """Adds the required `--data FOLDER` to the `argparse` parser."""
    parser.add_argument(
        "--data",
        required=True,
        help="the Multi30k folder ({train,val,test_2016_flickr}.{en,de}.gz)",
    )
