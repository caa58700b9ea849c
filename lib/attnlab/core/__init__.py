"""The building blocks of attention, importing only torch: input checks, the mask convention and the
NaN-free masked softmax, scaled dot-product and multi-head (and grouped-query) attention, the score
functions of Bahdanau and Luong, tiled online-softmax and linear attention, and the cpu/gpu profile.
"""
