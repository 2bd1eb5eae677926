"""Engine profiles: what is known about each inference engine, behind one protocol."""
