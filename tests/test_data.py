"""attnlab.data is a thin alias: every name it had still imports, as the very object of its new home.

The tests of the corpus, vocabularies, loaders and TSV reader live in test_corpus*.py,
test_korean.py, test_vocab.py, test_loaders.py and test_tsv.py.
"""

import ast
from pathlib import Path

import pytest

import attnlab.corpus.splits
import attnlab.corpus.tsv
import attnlab.loaders
import attnlab.vocab
from attnlab import data

# Every public name attnlab.data exported before it became an alias (its old __all__).
OLD_NAMES = (
    "CORPUS_VERSION SPECIALS PAD BOS EOS UNK BUCKETS BUCKET_NAMES MIN_SRC_LEN MAX_SRC_LEN bucket_name Pair Splits "
    "generate_pairs make_splits make_test_split load_splits Vocab build_vocabs encode_pairs collate "
    "make_dataloaders padding_fraction load_tsv tokenize_en tokenize_fr"
).split()
HOMES = (attnlab.corpus.splits, attnlab.corpus.tsv, attnlab.vocab, attnlab.loaders)


@pytest.mark.parametrize("name", OLD_NAMES)
def test_old_name_is_the_new_object(name):
    homes = [m for m in HOMES if name in m.__all__]
    assert len(homes) == 1, (name, homes)
    assert getattr(data, name) is getattr(homes[0], name)
    assert name in data.__all__


def test_alias_defines_nothing_itself():
    tree = ast.parse(Path(data.__file__).read_text())
    defined = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Assign)]
    assert [getattr(n, "name", None) or ast.unparse(n)[:20] for n in defined] == ["__all__ = ['CORPUS_V"]
    assert set(data.__all__) <= set(dir(data))
