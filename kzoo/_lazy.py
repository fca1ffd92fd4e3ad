"""Package namespaces whose names are imported on first use (PEP 562), so that importing a package costs nothing
until one of its names is used: `import kzoo.train` does not import TensorFlow, `kzoo.train.strategy` does."""

import importlib


def lazy_namespace(package, exports):
    """`__getattr__` and `__dir__` for the package called `package`.

    `exports` maps each public name to the module that defines it (a submodule's own name maps to the submodule).
    """

    def __getattr__(name):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(exports[name])
        value = module if module.__name__ == f"{package}.{name}" else getattr(module, name)
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value  # later lookups no longer come here
        return value

    def __dir__():
        return sorted(set(importlib.import_module(package).__dict__) | set(exports))

    return __getattr__, __dir__
