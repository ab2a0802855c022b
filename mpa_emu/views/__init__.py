"""What a user reads: ladders, diagrams, the capture story and the HTML reports.

:mod:`~mpa_emu.views.ladder` (text ladders and frame summaries),
:mod:`~mpa_emu.views.diagram` (ladder diagrams of captures and scenarios, text or SVG),
:mod:`~mpa_emu.views.inspection` (``mpa-emu inspect``: the story of each connection) and
:mod:`~mpa_emu.views.html` (the self-contained ``--html`` pages).
"""
