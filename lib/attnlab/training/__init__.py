"""Training and recording models: the fastai toolkit with step budgets, the named experiments of every
profile and pair, the model families by name, checkpoints and results files, evaluation of whole
models, the explanation tests, memory estimates, the README's report and the command line
(``python -m attnlab.training PRESET``).
"""
