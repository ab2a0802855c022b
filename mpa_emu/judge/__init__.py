"""Who is who in a capture, and each side judged by its own stack's rules.

- :mod:`mpa_emu.judge.stacks`: what each stack (irdma, siw, cxgb4) takes and refuses, its
  limits and timers, with the kernel functions behind them;
- :mod:`mpa_emu.judge.fingerprint`: the stack of one side decided from the wire (SYN
  options, MPA flags and revision, the RFC 6581 block), with the evidence;
- :mod:`mpa_emu.judge.profile`: ``--profile 10.0.0.1=siw,10.0.0.2=cxgb4``;
- :mod:`mpa_emu.judge.rules`: the refusals of one stack reading a request or a reply;
- :mod:`mpa_emu.judge.verdicts`: both applied to a connection of inspect's report.

The views render what this package decides; they never judge a side themselves. The
submodules are imported by name (the package imports none of them, so that the report
model in :mod:`mpa_emu.views.inspection` and this package can import each other).
"""
