"""mpa_emu/examples/smbd_negotiate.toml with its two hosts on the stacks asked for."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "mpa_emu" / "examples" / "smbd_negotiate.toml"


def example_on(initiator: str, responder: str) -> str:
    """The example's text with the client on ``initiator`` and the server on
    ``responder`` (siw with peer_to_peer on: irdma refuses a request or reply without
    P2P)."""
    text = EXAMPLE.read_text()
    for host, address, stack in (("client", "192.0.2.1", initiator),
                                 ("server", "192.0.2.2", responder)):
        head, sep, rest = text.partition(f'name = "{host}"\naddress = "{address}"\nstack = ')
        assert sep, host
        _, _, tail = rest.partition("\n")
        params = "[host.params]\npeer_to_peer = true\n" if stack == "siw" else ""
        text = f'{head}{sep}"{stack}"\n{params}{tail}'
    return text
