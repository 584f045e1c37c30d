"""A client for TF Serving's REST API (port 8501 of `tensorflow/serving`).

Example:

Against `keras-transformer serve --rest-api-port` started here on free
ports (TF Serving's `--rest_api_port=8501` answers the same):

>>> from keras_transformer.serving import ServerOptions
>>> from keras_transformer.serving.server import start
>>> options = ServerOptions(export_base, "translator", port=0, rest_api_port=0)
>>> serving = start(options)
>>> client = RestTranslationClient(f"http://localhost:{serving.rest_port}", "translator")
>>> outputs = client.translate(["The child sleeps."])
>>> sorted(outputs), type(outputs["translation"][0])
(['score', 'translation'], <class 'str'>)
>>> serving.stop()
"""

import json
import urllib.error
import urllib.parse
import urllib.request

from keras_transformer._validation import check_positive_number


def _segment(value):
    """One URL path segment: every reserved character escaped, so that a
    name such as `../../admin` or `x:predict?x=1#` stays one segment."""
    return urllib.parse.quote(str(value), safe="")


class RestTranslationClient:
    """`POST /v1/models/NAME[/versions/N | /labels/LABEL]:predict` in the
    columnar format.

    Args:
        base_url: `http://host:port` or `https://...`; no other scheme.
        model: the model name (any string; escaped in the URL).
        timeout: seconds per call; None waits as long as the call takes.
    """

    def __init__(self, base_url, model, timeout=30.0):
        if timeout is not None:
            check_positive_number("timeout", timeout)
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(
                f"The REST base URL must be http(s)://host:port. Received: {base_url!r}"
            )
        if parsed.query or parsed.fragment:
            raise ValueError(
                f"The REST base URL takes no query or fragment. Received: {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout

    def _url(self, version, verb="", version_label=None):
        path = f"{self.base_url}/v1/models/{_segment(self.model)}"
        if version is not None and version_label is not None:
            raise ValueError(
                f"Name a version or a version label, not both. Received: {version!r}, "
                f"{version_label!r}"
            )
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int) or version < 0:
                raise ValueError(f"`version` must be an int >= 0. Received: version={version!r}")
            path += f"/versions/{version}"
        if version_label is not None:
            path += f"/labels/{_segment(version_label)}"
        return path + verb

    def _call(self, url, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            url, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")
            raise RuntimeError(f"TF Serving REST error {error.code}: {detail}") from None

    def translate(self, sentences, signature="serving_default", version=None, version_label=None):
        """Returns the signature's outputs (`translation`, `score`, ...)."""
        body = {"signature_name": signature, "inputs": {"text": list(sentences)}}
        outputs = self._call(self._url(version, ":predict", version_label), body)["outputs"]
        return outputs if isinstance(outputs, dict) else {"output": outputs}

    def score(self, sentences, translations, version=None, version_label=None):
        """The `score` signature: `{"log_prob": [...], "length": [...]}`."""
        if len(sentences) != len(translations):
            raise ValueError(
                f"One translation a sentence: received {len(sentences)} sentences and "
                f"{len(translations)} translations"
            )
        body = {
            "signature_name": "score",
            "inputs": {"text": list(sentences), "translation": list(translations)},
        }
        return self._call(self._url(version, ":predict", version_label), body)["outputs"]

    def status(self, version=None, version_label=None):
        return self._call(self._url(version, "", version_label))

    def metadata(self, version=None, version_label=None):
        return self._call(self._url(version, "/metadata", version_label))
