"""Serving: a local TF Serving-compatible server, and gRPC and REST clients.

Needs the `serving` extra: pip install "keras-transformer-nmt[serving]".
The deployment files for the official TensorFlow Serving image (model and
batching configs, docker-compose) are in the repository's `serving/` folder.
"""

from keras_transformer import _extras

_extras.check("grpc", "serving")
_extras.check("tensorflow_serving", "serving")


def __getattr__(name):
    # The clients load lazily, so importing one does not load the other's stack.
    if name == "ServerOptions":
        from keras_transformer.serving.options import ServerOptions

        return ServerOptions
    if name == "GrpcTranslationClient":
        from keras_transformer.serving.grpc_client import GrpcTranslationClient

        return GrpcTranslationClient
    if name == "RestTranslationClient":
        from keras_transformer.serving.rest_client import RestTranslationClient

        return RestTranslationClient
    raise AttributeError(name)


__all__ = ["GrpcTranslationClient", "RestTranslationClient", "ServerOptions"]
