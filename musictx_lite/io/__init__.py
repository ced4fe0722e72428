"""Input and output: the chorales as data and tokens, MIDI, audio, scores, and statistics of the music.

Chapter 0 introduces all of it. Nothing here knows about models: the models, the
engine, the study and the classroom build on these modules, never the other way round.
"""
