"""Data only: model configs as Hugging Face ships them (`models/`) and the hardware table (`hardware.toml`)."""
