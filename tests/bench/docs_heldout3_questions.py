"""Questions on the third held-out corpus (`docs_heldout3_corpus`): 32 paraphrases, 21 keyword questions.

Written blind, questions before documents, in commits that show the order. First the questions
and the file each was expected in, from what the author knew of these tools as a user, before
any document was opened (they were chosen by name and size only): 34 paraphrases and 22 keyword
questions. Then the documents were read and each question given a short verbatim quote of the
answering text from its file, checked against the files by tests/test_bench_heldout3.py. No
question's wording was changed after reading. Every answer found was in the file first named
(two later moved, see zstd's README below). Paraphrases are asked the way someone who half remembers
would ask; keyword questions use exact terms. Nothing of Ember's (chunking, indexing, search,
the bench) was run on this set while it was written.

Dropped after reading, because no file of the corpus answers them (5: 4 paraphrases, 1 keyword):
- "How do I get only the process numbers of whoever has a file open, so I can hand them
  straight to kill?" (lsof's quick start does not describe -t)
- "How do I create a new key non-interactively from a file of parameters?" (GnuPG's DETAILS
  only names the status lines of a batch key creation, not its parameter file)
- "Can the pager keep the first lines of a file pinned at the top while I scroll, like a
  spreadsheet heading?" (--header came after less 590, whose NEWS it was)
- "Is there an option to randomise the order prerequisites are built, to catch missing
  dependencies?" and ".NOTINTERMEDIATE" (both GNU make 4.4; this NEWS ends at 4.3)

Replaced: less's NEWS turned out to be in the Debian set (`docs_debian_corpus`), so it is not
held out; its three answered questions were removed ("Which version of the pager let me scroll
with the mouse wheel?", "less --incsearch", "LESSHISTFILE") and xz-utils' NEWS took its place,
with five new questions (3 paraphrases, 2 keyword) committed before that file was opened.
zstd's README is in the Debian set too, so it left the corpus; its two questions ("How can I get
much better ratios when compressing lots of tiny files of the same kind?", "zstd --train") are
answered in zstd's man page as well, so they now name that file, quoted from it.

Some are hard by nature: answers in long files (GnuPG's DETAILS, the NEWS of tar, make and xz,
the Expat reference), several files of one program (two OpenSSH READMEs; three pages of
pip's documentation; two Node.js API pages), and words several files share (compression and
threads in zstd, xz and tar; environment variables in pip and zstd; terminals in readline and
tmux). "make" and "stress" are also English words: the paraphrases use "make" only as the verb,
and never name a program otherwise.
"""

from __future__ import annotations

from typing import NamedTuple


class Question(NamedTuple):
    text: str
    key: str  # the answering file's stem
    quote: str  # verbatim from that file (whitespace aside)


LSOF = "lsof-00QUICKSTART"
GNUPG = "gnupg-DETAILS"
XZ = "xz-utils-NEWS"  # replaces less's NEWS, which the Debian set already uses
ZSTD_MAN = "zstd-zstd.1"
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
    Question(
        "Some files I deleted still take up disk space; how do I find which programs keep them open?",
        LSOF,
        "Lsof can help you find unlinked files on local disks.  It has an option, +L, that will list the "
        "link counts of open files.",
    ),
    Question(
        "How can I tell which program is listening on a particular network port?",
        LSOF,
        "You can add network names or addresses, protocol names, and service names or port numbers to the "
        "-i option to refine the search.",
    ),
    Question(
        "In the colon-separated key listing, which letter in the validity column means I trust the key "
        "completely, like my own?",
        GNUPG,
        "u :: The key is ultimately valid.  This often means that the secret key is available",
    ),
    Question(
        "What line does the machine-readable output print when a signature can't be checked because the "
        "key that made it isn't on my keyring?",
        GNUPG,
        "It was not possible to check the signature.  This may be caused by a missing public key or an "
        "unsupported algorithm.",
    ),
    Question(
        "How do I make the compressor use every processor core?",
        ZSTD_MAN,
        "is 0, attempt to detect and use the number of physical CPU cores",
    ),
    Question(
        "How do I get compression levels above the usual maximum of 19?",
        ZSTD_MAN,
        "unlocks high compression levels 20+ (maximum 22), using a lot more memory",
    ),
    Question(
        "How can I produce a small diff-like file between an old and a new version of a large file with "
        "the compressor?",
        ZSTD_MAN,
        "Specify the file to be used as a reference point for zstd",
    ),
    Question(
        "How can I get much better ratios when compressing lots of tiny files of the same kind?",
        ZSTD_MAN,  # first named: zstd's README (see above)
        "compression, which greatly improves efficiency on small files and messages",
    ),
    Question(
        "How do I go through a text file line by line in the JavaScript runtime?",
        READLINE,
        "A common use case for `readline` is to consume an input file one line at a time.",
    ),
    Question(
        "How can a command-line script prompt the user and wait for what they type, using promises?",
        READLINE,
        "Returns: {Promise} A promise that is fulfilled with the user's input in response to the `query`.",
    ),
    Question(
        "How do I move the terminal cursor or wipe the current row from a script?",
        READLINE,
        "The `readline.cursorTo()` method moves cursor to the specified position in a given [TTY][] `stream`.",
    ),
    Question(
        "How do I stop a pending timeout from keeping my program from exiting?",
        TIMERS,
        "When called, the active `Timeout` object will not require the Node.js event loop to remain active.",
    ),
    Question(
        "Can I await a pause instead of giving a callback?",
        TIMERS,
        "The `timers/promises` API provides an alternative set of timer functions that return `Promise` objects.",
    ),
    Question(
        "Where does the Python package installer keep the files it downloaded before, and how do I switch that off?",
        PIP_CACHE,
        "pip's caching behaviour is disabled by passing the `--no-cache-dir` option.",
    ),
    Question(
        "Can one dependencies list pull in another list kept in a separate file?",
        PIP_REQS,
        "If you wish, you can refer to other requirements files, like this:",
    ),
    Question(
        "Where does the Python package installer look for my per-user settings file on Linux?",
        PIP_CONFIG,
        "{file}`$HOME/.config/pip/pip.conf`, which respects the `XDG_CONFIG_HOME` environment variable.",
    ),
    Question(
        "How can I set any of the installer's command options from an environment variable?",
        PIP_CONFIG,
        "pip's command line options can be set with environment variables using the format `PIP_<UPPER_LONG_NAME>`",
    ),
    Question(
        "How can I bridge two remote networks at layer 2 through an encrypted remote-login connection?",
        SSH_TUN,
        "Layer 2 tunnels can be used in combination with an Ethernet bridge(4) interface",
    ),
    Question(
        "How do I publish a server's host key fingerprints in the name service so clients can check them?",
        SSH_DNS,
        "To create a DNS resource record (RR) containing a fingerprint of the public host key, use the "
        "following command:",
    ),
    Question("Which account does the web server normally run as?", USERS, "Some web servers run as www-data."),
    Question(
        "Which group must I be in to use serial ports and modems?",
        USERS,
        "Full and direct access to serial ports. Members of this group can reconfigure the modem, dial anywhere, etc.",
    ),
    Question(
        "How do I pause the XML parser from inside a callback and continue later?",
        EXPAT,
        "To stop parsing from a handler function, use the XML_StopParser function.",
    ),
    Question(
        "How do I protect against small documents that expand enormously through nested entity definitions?",
        EXPAT,
        "The functions in this section configure the built-in protection against various forms of billion "
        "laughs attacks.",
    ),
    Question(
        "Since which release can the archiver use Facebook's fast compression format?",
        TAR,
        "* Support for zstd compression\n\nNew option '--zstd' instructs tar to use zstd as compression program.",
    ),
    Question(
        "How do I make archives reproducible by ordering the members by name?",
        TAR,
        "Using --sort=name ensures the member ordering in the created archive is uniform and reproducible.",
    ),
    Question(
        "How do I make the build tool run all the lines of a rule's commands in one shell?",
        MAKE,
        ".ONESHELL instructs make to invoke a single instance of the shell and provide it with the entire recipe",
    ),
    Question(
        "How can I stop the output of jobs running in parallel getting mixed together?",
        MAKE,
        "This is useful during parallel builds to avoid mixing output from different jobs together",
    ),
    Question(
        "What libraries do I need to build the terminal multiplexer from source?",
        TMUX,
        "tmux depends on libevent 2.x, available from:",
    ),
    Question(
        "How can I load the processor, memory and disk at the same time to test a machine?",
        STRESS,
        "stress is a tool that imposes a configurable amount of CPU, memory, I/O, or disk stress",
    ),
    # xz-utils' NEWS replaced less's (see above); these were written before it was opened.
    Question(
        "Which release let the compressor use several threads when compressing?",
        XZ,
        "Multi-threaded compression can be enabled with the --threads (-T) option.",
    ),
    Question(
        "Can the compressor now decompress in parallel with several threads too?",
        XZ,
        "Added threaded .xz decompressor lzma_stream_decoder_mt().",
    ),
    Question(
        "Which version added a filter for ARM64 executables to improve compression of program files?",
        XZ,
        "The ARM64 filter is now stable. The xz option is now --arm64.",
    ),
)

KEYWORD_SET = (
    Question(
        "lsof +L1",
        LSOF,
        "Better yet, you can specify an upper bound to the +L option, and lsof will select only files that "
        "have a link count less than the upper bound.",
    ),
    Question("GOODSIG", GNUPG, "GOODSIG  <long_keyid_or_fpr>  <username>\n    The signature with the keyid is good."),
    Question(
        "DECRYPTION_FAILED",
        GNUPG,
        "The symmetric decryption failed - one reason could be a wrong passphrase for a symmetrical encrypted message.",
    ),
    Question("KEY_CONSIDERED", GNUPG, "KEY_CONSIDERED <fpr> <flags>\n    Issued to explain the lookup of a key."),
    Question("ZSTD_CLEVEL", ZSTD_MAN, 'can be used to set the level between 1 and 19 (the "normal" range)'),
    Question("zstd --train", ZSTD_MAN, "Use FILEs as training set to create a dictionary"),  # first: the README
    Question(
        "crlfDelay",
        READLINE,
        "If the delay between `\\r` and `\\n` exceeds `crlfDelay` milliseconds, both `\\r` and `\\n` will "
        "be treated as separate end-of-line input.",
    ),
    Question("timeout.refresh()", TIMERS, "Sets the timer's start time to the current time, and reschedules the timer"),
    Question(
        "timersPromises.scheduler.wait",
        TIMERS,
        "Calling `timersPromises.scheduler.wait(delay, options)` is equivalent to calling "
        "`timersPromises.setTimeout(delay, undefined, options)`.",
    ),
    Question("pip cache purge", PIP_CACHE, "`pip cache purge` will clear all wheel files from pip's cache."),
    Question(
        "PIP_CONFIG_FILE",
        PIP_CONFIG,
        "the environment variable `PIP_CONFIG_FILE` can be used to specify a configuration file that's loaded first",
    ),
    Question("requirements file --hash option", PIP_REQS, "`--hash` (for {ref}`Hash-checking mode`)"),
    Question(
        "PermitTunnel",
        SSH_TUN,
        "To enable the ssh server to accept tunnel requests from the client, you have to add the following "
        "option to the ssh server configuration file (/etc/ssh/sshd_config): PermitTunnel yes",
    ),
    Question(
        "VerifyHostKeyDNS",
        SSH_DNS,
        "To enable the ssh client to verify host keys using DNS, you have to add the following option to "
        "the ssh configuration file ($HOME/.ssh/config or /etc/ssh/ssh_config): VerifyHostKeyDNS yes",
    ),
    Question(
        "plugdev",
        USERS,
        "Members of this group can access removable devices in limited ways without explicit configuration "
        "in /etc/fstab.",
    ),
    Question("XML_SetElementHandler", EXPAT, "Set handlers for start and end tags with one call."),
    Question(
        "XML_ParserReset",
        EXPAT,
        "Clean up the memory structures maintained by the parser so that it may be used again.",
    ),
    Question(
        "tar --clamp-mtime",
        TAR,
        "The new --clamp-mtime option changes the behavior of --mtime to only use the time specified if "
        "the file mtime is newer than the given time.",
    ),
    Question(
        "tar --one-top-level",
        TAR,
        "The option --one-top-level tells tar to extract all files into a subdirectory named by the base "
        "name of the archive",
    ),
    # xz-utils' NEWS replaced less's (see above); these were written before it was opened.
    Question(
        "xz --block-list",
        XZ,
        "--block-list allows specifying the sizes of Blocks which can be useful e.g. when creating files for "
        "random-access reading.",
    ),
    Question(
        "xz --memlimit-mt",
        XZ,
        "Added a new option --memlimit-mt-decompress=LIMIT. This is used to limit the number of decompressor threads",
    ),
)

# What the recall bench takes: (question, answer file's stem)
PARAPHRASE = [(q.text, q.key) for q in PARAPHRASE_SET]
KEYWORD = [(q.text, q.key) for q in KEYWORD_SET]
