"""Who is who in a capture, and each side judged by its own stack's rules.

- :mod:`mpa_emu.judge.stacks`: what each stack (irdma, siw, cxgb4) takes and refuses, its
  limits and timers, with the kernel functions behind them;
- :mod:`mpa_emu.judge.fingerprint`: the stack of one side decided from the wire (SYN
  options, MPA flags and revision, the RFC 6581 block), with the evidence;
- :mod:`mpa_emu.judge.profile`: ``--profile 10.0.0.1=siw,10.0.0.2=cxgb4``;
- :mod:`mpa_emu.judge.rules`: the refusals of one stack reading a request or a reply;
- :mod:`mpa_emu.judge.verdicts`: both applied to a connection of inspect's report;
- :mod:`mpa_emu.judge.model`: the records the reports hold (``SideStack``,
  ``Refusal``);
- :mod:`mpa_emu.judge.capture_stacks`: every side of a capture with its stack;
- :mod:`mpa_emu.judge.catalogue`, :mod:`mpa_emu.judge.explain` and
  :mod:`mpa_emu.judge.cm_events`: ``mpa-emu explain``'s causes, the explanation of a
  connection and the rdma_cm events of cma_iw_handler.

The views render what this package decides; they never judge a side themselves. The
submodules are imported by name (the package imports none of them, so that the report
model in :mod:`mpa_emu.views.inspection` and this package can import each other).
"""
