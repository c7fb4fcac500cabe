"""Configuration: the settings file and where each value comes from, the options, the model entries
(models, applications and their credentials), the judge's rubric files, the public benchmarks' data
sources and the default margins. Importing this package imports nothing else."""
