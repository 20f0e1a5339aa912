"""Getting a model from the Hugging Face Hub (or the `HF_ENDPOINT` mirror): search, list, download.

    files.py     HubFile and HubRepo (plain values), picking a repository's files by name or quant
    errors.py    HubError, DownloadError, DownloadCancelled: one readable line each
    client.py    HubClient: search and listing through `huggingface_hub`, behind the network guard
    consent.py   the one-time "Allow downloads from huggingface.co?" as an allowed destination
    transfer.py  one file: a ranged GET streamed into `<name>.part`, hashed by Ember as it arrives
    download.py  one item (a model, its shards, its projector): disk space, resume, verify, rename

Zero-egress stays the default: nothing here connects until the user has allowed the Hub's host
(`allow_downloads`, `ember models pull --allow`), and every connection goes through the audit
hook of `engine.network.guard` and lands in the ledger as the feature "model download".
Qt-free: the window and `ember models pull` only show what is here.
"""
