//! What the CLI prints. Data on stdout; a reader that went away (`mcp-broker tools search ...
//! | head`) ends the command quietly and successfully, as the other end of a pipe expects; any
//! other write error is said on stderr. Messages on stderr. Both go through one sanitiser:
//! text from upstreams, configs and programs may hold escape sequences that would rewrite the
//! operator's terminal, so every control character but line breaks and tabs is shown escaped.

use std::borrow::Cow;
use std::io::Write;

/// `text` fit for a terminal: control characters (ESC, BEL, CR, C1 controls such as CSI) and
/// bidirectional overrides shown escaped, line breaks and tabs kept.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !matches!(c, '\n' | '\t'))
            || matches!(c as u32, 0x202A..=0x202E | 0x2066..=0x2069)
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if unsafe_char(c) {
                    c.escape_unicode().collect()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// `text` fit for one line of a terminal: like `printable`, and line breaks and tabs escaped
/// too, so a value from a file (a path holding a newline) cannot forge lines of its own.
pub(crate) fn one_line(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\r', '\t']) {
        return printable(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match c {
                '\n' | '\r' | '\t' => c.escape_default().collect(),
                c => printable(&c.to_string()).into_owned(),
            })
            .collect(),
    )
}

/// Writes to stderr through the sanitiser.
pub(crate) fn write_err(args: std::fmt::Arguments<'_>, newline: bool) {
    let text = args.to_string();
    let text = printable(&text);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if newline {
        let _ = err.write_all(b"\n");
    }
}

/// Writes control sequences the CLI itself composed (the dashboard's screen clear), unsanitised.
pub(crate) fn write_trusted(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
}

pub(crate) fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let text = args.to_string();
    let text = printable(&text);
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "mcp-broker: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` for data: see the module.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!(""), true)
    };
    ($($t:tt)*) => {
        $crate::out::write(format_args!($($t)*), true)
    };
}

/// `print!` for data: see the module.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::out::write(format_args!($($t)*), false)
    };
}

/// `eprintln!` through the sanitiser: see the module.
macro_rules! errln {
    () => {
        $crate::out::write_err(format_args!(""), true)
    };
    ($($t:tt)*) => {
        $crate::out::write_err(format_args!($($t)*), true)
    };
}

/// `eprint!` through the sanitiser.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::out::write_err(format_args!($($t)*), false)
    };
}

/// `s` as one word of a shell command line.
pub(crate) fn word(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| format!("{s:?}"), |q| q.into_owned())
}
