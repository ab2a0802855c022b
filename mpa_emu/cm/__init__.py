"""The irdma connection manager (cm.c) as a sans-IO core: one :class:`CmCore` per host.

Modules: :mod:`~mpa_emu.cm.core` (``CmCore``, the verbs and the receive path),
:mod:`~mpa_emu.cm.transitions` (the one (state, input) table), :mod:`~mpa_emu.cm.states`
(``CmState`` and the inputs, kernel names and values), :mod:`~mpa_emu.cm.node` (the
slotted ``irdma_cm_node`` and listener), :mod:`~mpa_emu.cm.tcp` (``irdma_check_seq``,
option parsing), :mod:`~mpa_emu.cm.mpa_policy` (``irdma_parse_mpa`` and the IRD/ORD
negotiation), :mod:`~mpa_emu.cm.timing` (jiffies and the compiled back-off),
:mod:`~mpa_emu.cm.errors` (``CmError``), :mod:`~mpa_emu.cm.view` (``NodeView``),
:mod:`~mpa_emu.cm.config` and :mod:`~mpa_emu.cm.events`. ``disconnect`` and ``teardown``
hold the paths after offload and the teardown by address. See docs/cm-core.md.
"""
