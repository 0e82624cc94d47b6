//! Files of the data directory the broker rewrites whole (the ACLs, the SCRAM credentials).

use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to a temporary file beside `path` (mode 600 when `private`), syncs it,
/// renames it over `path` and syncs the directory: the old file stays whole until the new
/// one is, so a failed write leaves it as it was.
///
/// # Errors
/// What failed, naming `path`.
pub(crate) fn replace(path: &Path, bytes: &[u8], private: bool) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("{what} `{}`: {e}", path.display());
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = options
        .open(&tmp)
        .map_err(|e| fail("cannot create beside", e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| fail("cannot write beside", e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| fail("cannot replace", e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| fail("cannot sync the directory of", e))?;
    }
    Ok(())
}
