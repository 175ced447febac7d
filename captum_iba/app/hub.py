"""Whether the Hugging Face hub can be reached, asked once before any hub
client is: offline, the clients retry for tens of seconds before they fail.

Both routes to the hub ask here first - a model by hub id
(:mod:`captum_iba.app.models`) and a corpus read from the hub
(:mod:`captum_iba.app.data.load`) - so that an offline machine gets the
package's own message at once. Torch-free.
"""

import os
import socket
from urllib.parse import urlparse

__all__ = ["hub_reachable", "offline_reason"]

#: Seconds the check waits for the hub's host to answer.
TIMEOUT = 3.0


def offline_reason(timeout: float = TIMEOUT) -> str:
    """Why the hub cannot be reached ("" when it can, as far as can be told).

    ``HF_HUB_OFFLINE`` (or ``HF_DATASETS_OFFLINE``) set says offline; with a
    proxy (``HTTPS_PROXY``) the proxy decides and the hub client tries; else
    the host of ``HF_ENDPOINT`` (default ``huggingface.co``) must accept a
    connection within ``timeout`` seconds.

    Args:
        timeout (float): Seconds to wait for the host.

    Returns:
        str: ``""``, or the reason in words.
    """
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no"):
            return f"${name} is set"
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy")):
        return ""  # the proxy decides; let the hub client try
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as err:
        why = err.strerror or type(err).__name__
        return f"{host} cannot be reached ({why}; offline?)"


def hub_reachable(timeout: float = TIMEOUT) -> bool:
    """Whether the hub's host answers (False in offline mode): see
    :func:`offline_reason`."""
    return not offline_reason(timeout)
