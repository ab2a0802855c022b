"""Who is who in a capture, and what each stack refuses: the judge's rules, free of any
report (the views apply them).

- :mod:`mpa_emu.judge.stacks`: the names a side can be judged as (every registered
  stack, linux-userspace, unknown) and each stack's limits and timers (its own facts);
- :mod:`mpa_emu.judge.fingerprint`: the stack of one side decided from the wire (SYN
  options, MPA flags and revision, the RFC 6581 block, private data, Terminate layout),
  with the evidence;
- :mod:`mpa_emu.judge.profile`: ``--profile 10.0.0.1=siw,10.0.0.2=cxgb4``;
- :mod:`mpa_emu.judge.rules`: the refusals of one stack reading a request or a reply
  (each stack's own rules, :attr:`mpa_emu.stacks.base.Stack.refusals`);
- :mod:`mpa_emu.judge.model`: the records the reports hold (``SideStack``,
  ``Refusal``); :mod:`mpa_emu.judge.shapes`: what the judge reads of a frame and a side;
- :mod:`mpa_emu.judge.catalogue` and :mod:`mpa_emu.judge.cm_events`: ``mpa-emu
  explain``'s causes and the rdma_cm events of cma_iw_handler.

The views apply them: :mod:`mpa_emu.views.inspection.judging` judges each side of an
inspected connection, :mod:`mpa_emu.views.explanation` explains a connection. The
package imports none of its submodules.
"""
