"""TF Serving's warm-up file: `assets.extra/tf_serving_warmup_requests`, a TFRecord file of `PredictionLog`s that
TF Serving replays when it loads a version, before the version takes traffic (so compiles happen at load, not on a
user's request; tensorflow.org/tfx/serving/saved_model_warmup). A request that fails there fails the load.

TFRecord framing (tensorflow/core/lib/io/record_writer.cc): for each record, its length (uint64, little-endian),
the masked CRC-32C of those 8 bytes, the record, the masked CRC-32C of the record. Standard library only: the
contract loader (`c_api_loader.py`) imports it by file and replays the file at load, as TF Serving does.
"""

import struct

WARMUP_FILE = "tf_serving_warmup_requests"  # under a version's assets.extra/
MAX_RECORDS = 1000  # TF Serving reads at most this many warm-up records


def _table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli's polynomial, reflected
        table.append(crc)
    return table


_TABLE = _table()


def crc32c(data):
    """CRC-32C (Castagnoli) of `data`, as TFRecord files use it.

    Example:
    ```python
    from kzoo.serving.warmup import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    ```
    """
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecords(records):
    """The bytes of a TFRecord file holding `records` (bytes each), uncompressed.

    Example:
    ```python
    import pathlib
    from kzoo.serving.warmup import tfrecords

    pathlib.Path("r.tfrecord").write_bytes(tfrecords([b"one", b"two"]))
    assert [r.numpy() for r in tf.data.TFRecordDataset("r.tfrecord")] == [b"one", b"two"]  # TensorFlow reads it
    ```
    """
    out = bytearray()
    for record in records:
        length = struct.pack("<Q", len(record))
        out += length + struct.pack("<I", _masked(crc32c(length))) + record + struct.pack("<I", _masked(crc32c(record)))
    return bytes(out)


def read_tfrecords(data):
    """The records of a TFRecord file's bytes; a `ValueError` for a cut or corrupted file (a CRC that does not match),
    as TF Serving's reader refuses it.

    Example:
    ```python
    from kzoo.serving.warmup import read_tfrecords, tfrecords

    assert read_tfrecords(tfrecords([b"one", b""])) == [b"one", b""]
    try:
        read_tfrecords(tfrecords([b"one"])[:-1])
    except ValueError as error:
        assert "cut short" in str(error)
    ```
    """
    records, position = [], 0
    while position < len(data):
        if position + 12 > len(data):
            raise ValueError(f"TFRecord header at byte {position} of {len(data)} is cut short.")
        header, (length_crc,) = data[position : position + 8], struct.unpack("<I", data[position + 8 : position + 12])
        if _masked(crc32c(header)) != length_crc:
            raise ValueError(f"TFRecord length at byte {position} fails its CRC: the file is corrupted.")
        (length,) = struct.unpack("<Q", header)
        start, end = position + 12, position + 12 + length
        if end + 4 > len(data):
            raise ValueError(f"TFRecord of {length} bytes at byte {position} is cut short (the file has {len(data)}).")
        record = bytes(data[start:end])
        if _masked(crc32c(record)) != struct.unpack("<I", data[end : end + 4])[0]:
            raise ValueError(f"TFRecord at byte {position} fails its CRC: the file is corrupted.")
        records.append(record)
        position = end + 4
    return records
