//! Data on stdout. A reader that went away (`mcp-broker tools search ... | head`) ends the
//! command quietly and successfully, as the other end of a pipe expects; any other write
//! error is said on stderr.

use std::io::Write;

pub(crate) fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
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
        eprintln!("mcp-broker: cannot write to stdout: {e}");
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

pub(crate) use {out, outln};
