"""The retrieval set: questions over the standard-library corpus (`docs_stdlib`), each answered in one file.

Written for Ember, not taken from anywhere. `KEYWORD` questions keep the document's own words
(what BM25 is good at); `PARAPHRASE` questions say the same need in other words, without the
module's name or its distinctive terms (what vectors are for). The answer is the module whose
docstrings say it; a question counts as found at rank r when that file's first passage in the
ranking is the r-th distinct file.
"""

from __future__ import annotations

KEYWORD: tuple[tuple[str, str], ...] = (
    ("heap queue algorithm, a.k.a. priority queue", "heapq"),
    ("lexical analyzer for simple shell-like syntaxes", "shlex"),
    ("Keyed-Hashing for Message Authentication", "hmac"),
    ("quoted-printable transport encoding", "quopri"),
    ("infinite-precision rational numbers", "fractions"),
    ("Base85 and Ascii85 data encodings", "base64"),
    ("cryptographically strong pseudo-random numbers for account authentication tokens", "secrets"),
    ("configuration file sections lead by a header", "configparser"),
    ("guess the MIME type of a file", "mimetypes"),
    ("SMTP/ESMTP client class", "smtplib"),
    ("FTP client class, File Transfer Protocol RFC 959", "ftplib"),
    ("multi-producer, multi-consumer queue", "queue"),
    ("bisection algorithms insort", "bisect"),
    ("filename matching with shell patterns", "fnmatch"),
    ("cache lines from Python source files", "linecache"),
    ("object-oriented interface to .netrc files", "netrc"),
    ("conversion functions between RGB and other color systems", "colorsys"),
    ("read from and write to tar format archives", "tarfile"),
    ("utilities for with-statement contexts, PEP 343", "contextlib"),
    ("IPv4/IPv6 manipulation library", "ipaddress"),
    ("generic shallow and deep copying operations", "copy"),
)

PARAPHRASE: tuple[tuple[str, str], ...] = (
    ("How can I always pull out the smallest item of a growing collection cheaply?", "heapq"),
    ("Prove a message was not altered in transit using a secret both sides know", "hmac"),
    ("Exact arithmetic with ratios of whole numbers instead of floating point", "fractions"),
    ("Create an unguessable link for resetting a user's login", "secrets"),
    ("Read program settings from an INI style file", "configparser"),
    ("Work out a document's content type from its extension", "mimetypes"),
    ("Send an email message through a mail server", "smtplib"),
    ("Find the place to add an element so that an ordered list stays ordered", "bisect"),
    ("Turn a shade given as tint and brightness into screen colour components", "colorsys"),
    ("Run another program and collect what it prints", "subprocess"),
    ("Duplicate a nested object so that changing the duplicate leaves the original alone", "copy"),
    ("Check whether a machine's address belongs to a given subnet", "ipaddress"),
    ("Show nested data structures in a readable, indented layout", "pprint"),
    ("How long does a small snippet of code take to execute?", "timeit"),
    ("Compare two texts and show what changed between them", "difflib"),
    ("The average and the middle value of a list of numbers", "statistics"),
    ("Save objects to disk and load them back in a later session", "pickle"),
    ("Reflow long paragraphs so no line is wider than a limit", "textwrap"),
    ("A scratch file that disappears once it is closed", "tempfile"),
    ("Ask the user for a secret without echoing it on the terminal", "getpass"),
    ("Run a callback at a given moment in the future", "sched"),
)
