"""Questions on the third held-out corpus (`docs_heldout3_corpus`), written BLIND.

Stage 1 of 2: the questions and the file each is expected in, written from what the author
knows of these tools as a user, before any of the 18 documents was opened (they were chosen
by name and size only). The verbatim quotes are added in a later commit, after reading.
"""

from __future__ import annotations

from typing import NamedTuple


class Question(NamedTuple):
    text: str
    key: str  # the answering file's stem
    quote: str = ""  # verbatim from that file (whitespace aside); filled in after reading


LSOF = "lsof-00QUICKSTART"
GNUPG = "gnupg-DETAILS"
LESS = "less-NEWS"
ZSTD_MAN = "zstd-zstd.1"
ZSTD_README = "zstd-README.md"
READLINE = "nodejs-readline"
TIMERS = "nodejs-timers"
PIP_CACHE = "pip-caching.md"
PIP_REQS = "pip-requirements-file-format.md"
PIP_CONFIG = "pip-configuration.md"
SSH_TUN = "openssh-README-tun"
SSH_DNS = "openssh-README-dns"
USERS = "base-passwd-users-and-groups"
EXPAT = "expat-reference"
TAR = "tar-NEWS"
MAKE = "make-NEWS"
TMUX = "tmux-README"
STRESS = "stress-README"

PARAPHRASE_SET = (
    Question("Some files I deleted still take up disk space; how do I find which programs keep them open?", LSOF),
    Question(
        "How do I get only the process numbers of whoever has a file open, so I can hand them straight to kill?", LSOF
    ),
    Question("How can I tell which program is listening on a particular network port?", LSOF),
    Question(
        "In the colon-separated key listing, which letter in the validity column means I trust the key "
        "completely, like my own?",
        GNUPG,
    ),
    Question(
        "What line does the machine-readable output print when a signature can't be checked because the key "
        "that made it isn't on my keyring?",
        GNUPG,
    ),
    Question("How do I create a new key non-interactively from a file of parameters?", GNUPG),
    Question("Which version of the pager let me scroll with the mouse wheel?", LESS),
    Question(
        "Can the pager keep the first lines of a file pinned at the top while I scroll, like a spreadsheet heading?",
        LESS,
    ),
    Question("How do I make the compressor use every processor core?", ZSTD_MAN),
    Question("How do I get compression levels above the usual maximum of 19?", ZSTD_MAN),
    Question(
        "How can I produce a small diff-like file between an old and a new version of a large file with the "
        "compressor?",
        ZSTD_MAN,
    ),
    Question("How can I get much better ratios when compressing lots of tiny files of the same kind?", ZSTD_README),
    Question("How do I go through a text file line by line in the JavaScript runtime?", READLINE),
    Question("How can a command-line script prompt the user and wait for what they type, using promises?", READLINE),
    Question("How do I move the terminal cursor or wipe the current row from a script?", READLINE),
    Question("How do I stop a pending timeout from keeping my program from exiting?", TIMERS),
    Question("Can I await a pause instead of giving a callback?", TIMERS),
    Question(
        "Where does the Python package installer keep the files it downloaded before, and how do I switch that off?",
        PIP_CACHE,
    ),
    Question("Can one dependencies list pull in another list kept in a separate file?", PIP_REQS),
    Question("Where does the Python package installer look for my per-user settings file on Linux?", PIP_CONFIG),
    Question("How can I set any of the installer's command options from an environment variable?", PIP_CONFIG),
    Question("How can I bridge two remote networks at layer 2 through an encrypted remote-login connection?", SSH_TUN),
    Question(
        "How do I publish a server's host key fingerprints in the name service so clients can check them?", SSH_DNS
    ),
    Question("Which account does the web server normally run as?", USERS),
    Question("Which group must I be in to use serial ports and modems?", USERS),
    Question("How do I pause the XML parser from inside a callback and continue later?", EXPAT),
    Question(
        "How do I protect against small documents that expand enormously through nested entity definitions?", EXPAT
    ),
    Question("Since which release can the archiver use Facebook's fast compression format?", TAR),
    Question("How do I make archives reproducible by ordering the members by name?", TAR),
    Question("How do I make the build tool run all the lines of a rule's commands in one shell?", MAKE),
    Question("How can I stop the output of jobs running in parallel getting mixed together?", MAKE),
    Question("Is there an option to randomise the order prerequisites are built, to catch missing dependencies?", MAKE),
    Question("What libraries do I need to build the terminal multiplexer from source?", TMUX),
    Question("How can I load the processor, memory and disk at the same time to test a machine?", STRESS),
)

KEYWORD_SET = (
    Question("lsof +L1", LSOF),
    Question("GOODSIG", GNUPG),
    Question("DECRYPTION_FAILED", GNUPG),
    Question("KEY_CONSIDERED", GNUPG),
    Question("less --incsearch", LESS),
    Question("LESSHISTFILE", LESS),
    Question("ZSTD_CLEVEL", ZSTD_MAN),
    Question("zstd --train", ZSTD_README),
    Question("crlfDelay", READLINE),
    Question("timeout.refresh()", TIMERS),
    Question("timersPromises.scheduler.wait", TIMERS),
    Question("pip cache purge", PIP_CACHE),
    Question("PIP_CONFIG_FILE", PIP_CONFIG),
    Question("requirements file --hash option", PIP_REQS),
    Question("PermitTunnel", SSH_TUN),
    Question("VerifyHostKeyDNS", SSH_DNS),
    Question("plugdev", USERS),
    Question("XML_SetElementHandler", EXPAT),
    Question("XML_ParserReset", EXPAT),
    Question("tar --clamp-mtime", TAR),
    Question("tar --one-top-level", TAR),
    Question(".NOTINTERMEDIATE", MAKE),
)

# What the recall bench takes: (question, answer file's stem)
PARAPHRASE = [(q.text, q.key) for q in PARAPHRASE_SET]
KEYWORD = [(q.text, q.key) for q in KEYWORD_SET]
