"""Floods a gRPC Predict endpoint from a process of its own, for a while.

    python -m tests.serving.flood ADDRESS {expired,cancelled} CLIENTS SECONDS

Each of CLIENTS threads has a connection of its own and sends 4-sentence
`Predict` requests for SECONDS: `expired` gives each a 1 ms deadline (they
expire on arrival or in flight), `cancelled` cancels 8-sentence requests
after 0-20 ms. Prints `FLOODING` as it starts, then one JSON line: the
answers by status code (SIGTERM ends the flood early). Run from
another process than the server's and the measured client's, so that the
flood competes with them for the CPU, not for their interpreter.
"""

import json
import os
import random
import signal
import sys
import threading
import time

import grpc
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

SENTENCES = [b"The dog sleeps.", b"A tired teacher gives the red book to the children."]


def request(rows, model="translator"):
    """A `Predict` request of `rows` sentences, serialized."""
    message = predict_pb2.PredictRequest()
    message.model_spec.name = model
    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=rows)]
    shape = tensor_shape_pb2.TensorShapeProto(dim=dims)
    message.inputs["text"].CopyFrom(
        tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            tensor_shape=shape,
            string_val=[SENTENCES[i % len(SENTENCES)] for i in range(rows)],
        )
    )
    return message.SerializeToString()


def _client(address, mode, stop, counts, lock, seed):
    rng = random.Random(seed)
    # A connection of its own: channels with the same arguments share one.
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(address, options=options) as channel:
        predict = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        expired, cancelled = request(4), request(8)
        while not stop.is_set():
            try:
                if mode == "expired":
                    predict(expired, timeout=0.001)
                    code = "OK"
                else:
                    call = predict.future(cancelled, timeout=30)
                    time.sleep(rng.uniform(0, 0.02))
                    code = "CANCELLED_BY_CLIENT" if call.cancel() else "OK"
            except grpc.RpcError as error:
                code = error.code().name
            with lock:
                counts[code] = counts.get(code, 0) + 1


def flood(address, mode, clients, seconds, stop=None):
    """Runs the flood for `seconds`, or until `stop` (an Event) is set;
    returns `{status code name: count}`."""
    if mode not in ("expired", "cancelled"):
        raise ValueError(f"mode is expired or cancelled, not {mode!r}")
    stop, lock, counts = stop or threading.Event(), threading.Lock(), {}
    threads = [
        threading.Thread(target=_client, args=(address, mode, stop, counts, lock, i), daemon=True)
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    # One deadline for all: 64 threads closing their channels on a loaded
    # machine took over a minute when each had 5 s of its own.
    deadline = time.monotonic() + 10
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return dict(counts)


if __name__ == "__main__":
    address, mode, clients, seconds = sys.argv[1:5]
    stopped = threading.Event()  # SIGTERM ends the flood early, still printing its counts
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print("FLOODING", flush=True)
    counts = flood(address, mode, int(clients), float(seconds), stopped)
    print(json.dumps(counts), flush=True)
    os._exit(0)  # threads still closing their channels must not hold the exit
