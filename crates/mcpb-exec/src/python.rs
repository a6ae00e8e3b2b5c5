//! The Python runtime: the machine's python3 inside the jail, with the runner and the SDK module
//! that ship inside the binary placed read-only under /sdk.

use std::path::{Path, PathBuf};

use mcpb_sandbox::{JAIL_SDK, JailFile};

pub const RUNNER: &str = include_str!("python/runner.py");
pub const SDK: &str = include_str!("python/mcp_sdk.py");

/// Where the interpreter is looked for when the config names none.
const CANDIDATES: &[&str] = &["/usr/bin/python3", "/usr/local/bin/python3"];

#[derive(Debug, Clone)]
pub struct Python {
    /// The interpreter's real path (the jail sees it at the same place).
    pub exe: PathBuf,
    /// What the jail must bind read-only besides /usr (an installation elsewhere).
    pub prefix: Option<PathBuf>,
}

/// Finds the interpreter: the configured one, else the usual places, else `python3` on the
/// PATH. A launcher script (pyenv's shim) is not an interpreter: only real binaries count.
pub fn find(configured: Option<&str>) -> Result<Python, String> {
    let from_path = || {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("python3"))
                .find(|c| is_binary(c))
        })
    };
    let exe = match configured {
        Some(c) => {
            let p = PathBuf::from(c);
            if !is_binary(&p) {
                return Err(format!(
                    "broker.exec.python is {c}, which is not a Python interpreter binary"
                ));
            }
            p
        }
        None => CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find(|c| is_binary(c))
            .or_else(from_path)
            .ok_or_else(|| {
                "no python3 on this machine (looked in /usr/bin, /usr/local/bin and the PATH); \
                 install one (apt install python3) or set broker.exec.python"
                    .to_string()
            })?,
    };
    let exe = std::fs::canonicalize(&exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    if exe.starts_with("/usr") {
        return Ok(Python { exe, prefix: None });
    }
    // An installation elsewhere (pyenv, /opt) is bound whole, and only it: its own
    // sys.base_prefix, which must hold the interpreter and its standard library.
    let out = std::process::Command::new(&exe)
        .args(["-I", "-S", "-c", "import sys; print(sys.base_prefix)"])
        .env_clear()
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let prefix = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let has_stdlib = std::fs::read_dir(prefix.join("lib")).is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("python3")))
    });
    if !out.status.success() || !prefix.is_absolute() || !exe.starts_with(&prefix) || !has_stdlib {
        return Err(format!(
            "{}: its installation ({}) is not one directory holding the interpreter and its \
             standard library; set broker.exec.python to another interpreter",
            exe.display(),
            prefix.display()
        ));
    }
    if let Some(own) = mcpb_sandbox::JAIL_OWN
        .iter()
        .find(|s| prefix.starts_with(s))
    {
        return Err(format!(
            "{}: its installation ({}) is under {own}, which the sandbox has its own of\n\
             hint: install it elsewhere (/opt, your home) or set broker.exec.python to another interpreter",
            exe.display(),
            prefix.display()
        ));
    }
    Ok(Python {
        exe,
        prefix: Some(prefix),
    })
}

/// An ELF file, not a script.
fn is_binary(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

/// argv and files of a Python run: the runner and the SDK under /sdk; the snippet or the
/// workspace file to run comes as the job (see `runner.py`).
pub fn program(py: &Python) -> (Vec<String>, Vec<JailFile>) {
    let files = vec![
        JailFile {
            name: "runner.py".into(),
            contents: RUNNER.into(),
        },
        JailFile {
            name: "mcp_sdk.py".into(),
            contents: SDK.into(),
        },
    ];
    let argv = vec![
        py.exe.display().to_string(),
        // Isolated (no user site, no PYTHON* variables), no bytecode files in the workspace.
        "-I".into(),
        "-B".into(),
        format!("{JAIL_SDK}/runner.py"),
    ];
    (argv, files)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_configured_interpreter_must_be_a_binary() {
        let err = super::find(Some("/etc/passwd")).unwrap_err();
        assert!(err.contains("not a Python interpreter"), "{err}");
    }
}
