"""``mpa-emu demo``: the stories it tells (:mod:`~mpa_emu.demo.stories`), the
address-removal story (:mod:`~mpa_emu.demo.teardown`) and their shared set-up
(:mod:`~mpa_emu.demo.context`)."""
