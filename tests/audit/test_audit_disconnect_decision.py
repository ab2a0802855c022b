"""irdma_cm_disconn_true's issue_close condition names both bad-close AEs."""

from __future__ import annotations

import pytest
from mpa_emu.stacks.irdma.offload import IwQp
from mpa_emu.stacks.irdma.offload.states import Ae, TcpState

from mpa_emu.stacks.irdma import disconnect


@pytest.mark.parametrize("ae", [Ae.ROE_BAD_LLP_CLOSE, Ae.BAD_CLOSE])
def test_a_bad_llp_close_issues_close_without_disconnect(ae: Ae) -> None:
    # "last_ae == IRDMA_AE_RDMAP_ROE_BAD_LLP_CLOSE || last_ae == IRDMA_AE_BAD_CLOSE" sets
    # issue_close; with TCP still ESTABLISHED and no reset there is no DISCONNECT
    iw = IwQp(hw_tcp_state=TcpState.ESTABLISHED, last_aeq=ae)
    assert disconnect.disconn_decision(iw) == (False, 0, True)
