"""Peer profiles: each differs from irdma exactly as its docstring says (siw_cm.c for siw)."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.profiles import PROFILES, irdma, mpa_v1, profile, siw


def test_irdma_is_the_default_configuration() -> None:
    assert irdma() == CmConfig()


def test_siw_differs_in_p2p_rtr_pdata_and_markers() -> None:
    cfg = siw()
    assert (cfg.profile, cfg.p2p, cfg.rtr_preference, cfg.accept_markers) == (
        "siw", False, "write", False)
    assert cfg.quirks.v2_pdata_plus4 is False
    assert cfg.quirks.mpa_v1_fallback is False
    assert cfg.mpa_rev == 2
    # Everything else stays irdma's.
    base = CmConfig()
    assert (cfg.retrans, cfg.max_ird, cfg.max_ord, cfg.hz) == (
        base.retrans, base.max_ird, base.max_ord, base.hz)


def test_mpa_v1_peer_speaks_rev_1() -> None:
    cfg = mpa_v1()
    assert (cfg.profile, cfg.mpa_rev) == ("mpa-v1", 1)


def test_overrides_apply_and_unknown_fields_are_refused() -> None:
    assert siw(retrans=8).retrans == 8
    assert profile("mpa-v1", mtu=9000).mtu == 9000
    with pytest.raises(ValueError, match="unknown CmConfig field"):
        siw(no_such_knob=1)
    with pytest.raises(ValueError, match="unknown profile 'roce'"):
        profile("roce")


def test_every_profile_documents_its_source() -> None:
    for name, make in PROFILES.items():
        doc = make.__doc__ or ""
        assert "ource" in doc, f"profile {name} must name the source of its differences"
