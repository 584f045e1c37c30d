"""`ServerOptions`: one object for every setting of the server."""

import dataclasses

import pytest

from keras_transformer.serving.options import (
    DEFAULT_GRPC_CHANNEL_ARGUMENTS,
    ServerOptions,
    check_labels,
    parse_channel_arguments,
    parse_version_labels,
)


def test_defaults_are_tf_servings():
    options = ServerOptions()
    assert (options.port, options.rest_api_port, options.rest_api_timeout_in_ms) == (
        8500, None, 30000,
    )  # fmt: skip
    assert options.predict_threads == options.rest_threads >= 4  # 4 per CPU
    assert options.batching == {"max_batch_size": 32, "timeout": 0.005, "split": True}
    assert options.enable_model_warmup is True


def test_from_dict_round_trips_and_refuses_unknown_keys():
    options = ServerOptions(model_base_path="/m", model_name="t", version_label=["a=1"])
    assert ServerOptions.from_dict(dataclasses.asdict(options)) == options
    with pytest.raises(ValueError, match="Unknown serve option.*max_rows"):
        ServerOptions.from_dict({"max_rows": 3})


@pytest.mark.parametrize(
    "values,match",
    [
        ({"max_request_rows": 0}, "max_request_rows"),
        ({"grpc_max_threads": 0}, "grpc_max_threads"),
        ({"rest_api_num_threads": -1}, "rest_api_num_threads"),
        ({"rest_api_timeout_in_ms": 0}, "rest_api_timeout_in_ms"),
        ({"port": -1}, "port"),
        # gRPC bound a free port for 99999, and said nothing.
        ({"port": 99999}, "`port` must be a port from 0 to 65535"),
        ({"rest_api_port": 65536}, "`rest_api_port` must be a port"),
        ({"port": True}, "`port` must be a port"),
        ({"drain_seconds": -1}, "drain_seconds"),
        ({"version_policy": "newest"}, "version_policy"),
        ({"version_label": ["stable"]}, "LABEL=VERSION"),
        ({"version_label": ["a=1", "a=2"]}, "twice"),
        ({"grpc_channel_arguments": "grpc.max_connection_age_ms"}, "NAME=VALUE"),
        ({"grpc_channel_arguments": "=5"}, "NAME=VALUE"),
        ({"grpc_io_nice": -1}, "grpc_io_nice"),
        ({"grpc_io_nice": 20}, "grpc_io_nice.*0 to 19"),
        ({"grpc_hold_cancelling_ms": -1}, "grpc_hold_cancelling_ms"),
        ({"grpc_hold_cancelling_ms": 0.5}, "grpc_hold_cancelling_ms"),
    ],
)
def test_bad_values_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        ServerOptions(**values)


def test_parse_version_labels():
    assert parse_version_labels(["stable=1", "canary=12"]) == {"stable": 1, "canary": 12}
    assert parse_version_labels(None) == {}
    assert ServerOptions(version_label=["b=05"]).version_labels == {"b": 5}


@pytest.mark.parametrize("labels", [{"": 1}, {"a": -1}, {"a": True}, {"a": "1"}])
def test_check_labels_refuses(labels):
    with pytest.raises(ValueError, match="label"):
        check_labels(labels)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", {}),
        ("grpc.max_connection_age_ms=2000", {"grpc.max_connection_age_ms": 2000}),
        (" a=1 , b=x=y,", {"a": 1, "b": "x=y"}),
    ],
)
def test_parse_channel_arguments_as_tf_serving_reads_its_flag(text, expected):
    assert parse_channel_arguments(text) == expected


def test_channel_arguments_override_the_defaults():
    assert dict(ServerOptions().channel_arguments) == DEFAULT_GRPC_CHANNEL_ARGUMENTS
    # A flood's connections each hold at most 100 streams (gRPC: unlimited).
    assert DEFAULT_GRPC_CHANNEL_ARGUMENTS["grpc.max_concurrent_streams"] == 100
    options = ServerOptions(grpc_channel_arguments="grpc.server.max_pending_requests=5,x=1")
    assert dict(options.channel_arguments) == {
        **DEFAULT_GRPC_CHANNEL_ARGUMENTS, "grpc.server.max_pending_requests": 5, "x": 1,
    }  # fmt: skip
