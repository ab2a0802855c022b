"""The irdma connection manager (cm.c) as a sans-IO core: one :class:`CmCore` per host."""
