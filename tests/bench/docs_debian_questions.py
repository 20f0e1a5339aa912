"""50 questions over the Debian corpus (`docs_debian_corpus`), each with the one file that answers it.

KEYWORD questions keep the answer file's own words (and often its program's name);
PARAPHRASE questions name nothing from the answer file and use other words for what it says,
as a user who has not read it would ask. The answer is the corpus file's stem. Questions whose
answer is a licence text are the `licence-` ones (issue #39's "licence questions").
"""

from __future__ import annotations

KEYWORD: list[tuple[str, str]] = [
    ("jq regexp support Oniguruma submodule", "jq-README"),
    ("Why does ps -aux complain about a bogus '-'?", "procps-FAQ"),
    ("Why isn't the scrot --freeze option enabled by default? XGrabServer", "scrot-FAQ"),
    ("Why use man-db instead of man? catgets translations", "man-db-FAQ"),
    ("My /etc/issue says trixie/sid, should it not read testing?", "base-files-README"),
    ("policy-rc.d exit status 101 in chroot jails", "init-system-helpers-README.policy-rc.d"),
    ("pip refuses EXTERNALLY-MANAGED install, use pipx or venv", "python3.11-README.venv"),
    ("install local CA certificates in /usr/local/share/ca-certificates", "ca-certificates-README.Debian"),
    ("PermitRootLogin prohibit-password on new installations", "openssh-client-README.Debian"),
    ("xz -9 on a system with 256 MiB of RAM", "xz-utils-faq"),
    ("Does zlib support the Deflate64 format introduced by PKWare?", "zlib1g-dev-FAQ"),
    ("zstd dictionary compression of small data with --train", "zstd-README"),
    ("libffi foreign function interface supported platforms", "libffi8-README"),
    ("mawk configure --with-builtin-regex option", "mawk-README"),
    ("Valgrind reports still reachable memory leaks with C++ STL string classes", "valgrind-FAQ"),
    ("adduser deluser in maintainer scripts, delete users on purge", "adduser-README"),
    ("Statement of Purpose: Affirmer waiver of Copyright and Related Rights", "licence-CC0-1.0"),
    ("Minimal Corresponding Source of a Combined Work and Linked Version", "licence-LGPL-3"),
    ("WIPO copyright treaty adopted on 20 December 1996", "licence-GPL-3"),
    ("Exhibit B Incompatible With Secondary Licenses notice", "licence-MPL-2.0"),
    ("regular expressions with stray backslashes now cause warnings in grep", "grep-NEWS"),
    ("less --mouse option and LESSHISTFILE", "less-NEWS"),
    ("wget HSTS support and --no-hsts", "wget-NEWS"),
    ("patch --merge=diff3 style merges showing a conflict", "patch-NEWS"),
    ("systemd requirements: Linux kernel >= 3.15 and kernel config options", "systemd-README"),
]

PARAPHRASE: list[tuple[str, str]] = [
    (
        "Can a large website that many people edit move the manuals it hosts to another share-alike "
        "licence, and until what date?",
        "licence-GFDL-1.3",
    ),
    ("Which web browser company may publish revised versions of this licence?", "licence-MPL-1.1"),
    (
        "May I charge money for handing out unchanged copies of this bundle, and may it ship alongside "
        "commercial programs?",
        "licence-Artistic",
    ),
    ("Am I allowed to advertise my product as backed by the university whose code I reused?", "licence-BSD"),
    (
        "How does an author give up every right in a work worldwide, with a fallback permission where "
        "giving them up is not legally possible?",
        "licence-CC0-1.0",
    ),
    ("Why does the process lister print an account's name as digits when the column is narrow?", "procps-FAQ"),
    ("While picking a region of the display to capture, how do I stop key presses from aborting it?", "scrot-FAQ"),
    ("On the rolling branch, how can I tell which release I am really on?", "base-files-README"),
    (
        "Inside a jailed environment, how do I stop installing software from launching background services?",
        "init-system-helpers-README.policy-rc.d",
    ),
    (
        "The system will not let the language's package installer put libraries in system folders; "
        "what should I do instead?",
        "python3.11-README.venv",
    ),
    (
        "How do I make my organisation's own root authority trusted by programs on this machine?",
        "ca-certificates-README.Debian",
    ),
    (
        "Why can the superuser no longer sign in remotely with a password on a fresh install?",
        "openssh-client-README.Debian",
    ),
    ("What do the two letters in the name of this newer compressed file format stand for?", "xz-utils-faq"),
    ("Can this compression library safely be used from several threads at once?", "zlib1g-dev-FAQ"),
    ("Why does training on sample inputs help when squeezing many tiny payloads?", "zstd-README"),
    ("How can a program call a routine whose argument types it only learns while running?", "libffi8-README"),
    (
        "Why prefer this manual page reader over the older fork it split from, which uses an outdated "
        "translation system?",
        "man-db-FAQ",
    ),
    ("Which operating systems has this pattern-scanning language interpreter recently been tried on?", "mawk-README"),
    ("My memory checker says text objects of the C++ library leak at exit; is that real?", "valgrind-FAQ"),
    ("Should a package's removal scripts remove the system account it created?", "adduser-README"),
    (
        "What do I need installed to compile the command-line filter for structured data from its repository?",
        "jq-README",
    ),
    ("Which release lines of the server-side scripting runtime get long-term maintenance?", "nodejs-README"),
    ("In which release could the file viewer first be scrolled with the wheel of a pointing device?", "less-NEWS"),
    (
        "How do I keep a three-way view of old, original and new lines when a change does not apply cleanly?",
        "patch-NEWS",
    ),
    ("How old may the operating system core be for the init and service manager to work?", "systemd-README"),
]
