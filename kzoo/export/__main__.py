"""`python -m kzoo.export --run RUN --output saved_models/NAME`: a training run's translator as a SavedModel."""

import argparse
import json
import pathlib

import keras

from kzoo.export.translator_export import export_translator
from kzoo.text import SubwordTokenizer
from kzoo.translator import Translator


def main(argv=None):
    """Export a finished training run (`python -m kzoo.train.translation_recipe --output RUN`) as a SavedModel."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--run", required=True, help="the run folder: model.keras, tokenizer.model, config.json")
    parser.add_argument("--output", required=True, help="the model's folder; the version is written inside it")
    parser.add_argument("--version", type=int, help="defaults to one more than the highest existing version")
    args = parser.parse_args(argv)
    run = pathlib.Path(args.run)
    config = json.loads((run / "config.json").read_text())
    model = keras.saving.load_model(run / "model.keras", compile=False)  # no optimizer state in the export
    tokenizer = SubwordTokenizer.load(run / "tokenizer.model")
    translator = Translator(model, tokenizer, method="beam", beam_size=config["beam_size"],
                            length_penalty=config["length_penalty"], max_source_length=config["max_length"])
    print(export_translator(translator, args.output, args.version))


if __name__ == "__main__":
    main()
