use std::fs::{File, OpenOptions};

use super::*;
use crate::{Hooks, Options, Store};

fn family(dir: &tempfile::TempDir, name: &str) -> (PathBuf, Family) {
    let path = dir.path().join(name);
    let family = Family::of(&path).expect("family");
    (path, family)
}

fn code(r: Result<Option<Scan>>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

fn store(path: &Path) -> Result<Store> {
    Store::open(path.to_str().unwrap(), Options::default(), Hooks::default())
}

#[test]
fn a_foreign_handle_on_each_file_is_found_and_forgotten_once_closed() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, fam) = family(&dir, "state.sqlite");
    File::create(&db)?;
    assert_eq!(code(check(&fam)), "ok");
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = db.clone().into_os_string();
        name.push(suffix);
        let foreign = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&name)?;
        let found = scan(&fam).expect("supported here");
        assert_eq!(
            found.foreign,
            Some(std::os::fd::AsRawFd::as_raw_fd(&foreign))
        );
        assert!(!found.ours);
        assert_eq!(code(check(&fam)), "ERR_FILE_SHARED", "{suffix}");
        drop(foreign);
        // Nothing of ours was open on it: closing the foreign handle clears the file.
        assert_eq!(scan(&fam).expect("supported here").foreign, None);
        assert_eq!(code(check(&fam)), "ok", "{suffix}");
    }
    Ok(())
}

#[test]
fn a_foreign_handle_refuses_the_guard_at_open() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, _) = family(&dir, "state.sqlite");
    File::create(&db)?;
    let foreign = File::open(&db)?;
    let err = FileGuard::open(&db).err().expect("refused");
    assert_eq!(err.code(), "ERR_FILE_SHARED");
    assert!(err.to_string().contains("session-state.sqlite"));
    drop(foreign);
    let guard = FileGuard::open(&db)?;
    guard.check()?;
    Ok(())
}

#[test]
fn the_stores_own_connections_are_not_foreign() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, fam) = family(&dir, "state.sqlite");
    let a = store(&db)?;
    // The store's connections (main, checkpointer, poller) hold the file, its -wal and -shm.
    let found = scan(&fam).expect("supported here");
    assert_eq!((found.foreign, found.ours), (None, true));
    // A second store of this process on the same file uses the same SQLite.
    let b = store(&db)?;
    b.serve("agent:main:main")?;
    assert_eq!(b.state_version("agent:main:x", None)?, 0);
    a.close();
    // Reopening after a close, with the other store still open.
    let c = store(&db)?;
    c.prune(1_700_000_000_000)?;
    assert_eq!(code(check(&fam)), "ok");
    b.close();
    c.close();
    let found = scan(&fam).expect("supported here");
    assert_eq!((found.foreign, found.ours), (None, false));
    Ok(())
}

#[test]
fn a_file_shared_while_a_store_has_it_stays_refused_until_every_store_closed() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, fam) = family(&dir, "state.sqlite");
    let a = store(&db)?;
    let foreign = File::open(&db)?;
    assert_eq!(code(check(&fam)), "ERR_FILE_SHARED");
    drop(foreign);
    // The foreign close dropped this process's locks: a second store may not join.
    assert_eq!(store(&db).err().map(|e| e.code()), Some("ERR_FILE_SHARED"));
    assert_eq!(code(check(&fam)), "ERR_FILE_SHARED");
    a.close();
    assert_eq!(code(check(&fam)), "ok");
    store(&db)?.close();
    Ok(())
}

#[test]
fn writability_is_asked_without_opening() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, _) = family(&dir, "state.sqlite");
    assert_eq!(
        check_writable(&db).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    File::create(&db)?;
    check_writable(&db)?;
    Ok(())
}

#[cfg(target_os = "linux")]
#[test]
fn only_an_open_of_one_of_the_files_makes_the_guard_scan() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, _) = family(&dir, "state.sqlite");
    File::create(&db)?;
    let guard = FileGuard::open(&db)?;
    for _ in 0..100 {
        guard.check()?;
    }
    assert_eq!(guard.scans(), 0);
    // Another file of the directory, and a name that only starts like the database's.
    drop(File::create(dir.path().join("other.sqlite"))?);
    drop(File::create(dir.path().join("state.sqlite-wal2"))?);
    guard.check()?;
    assert_eq!(guard.scans(), 0);
    // The database itself, opened and closed again: one scan, which finds nothing.
    drop(File::open(&db)?);
    guard.check()?;
    guard.check()?;
    assert_eq!(guard.scans(), 1);
    // The -shm, still open at the next check: found.
    let mut shm = db.clone().into_os_string();
    shm.push("-shm");
    let foreign = File::create(&shm)?;
    assert_eq!(guard.check().unwrap_err().code(), "ERR_FILE_SHARED");
    assert_eq!(guard.scans(), 2);
    drop(foreign);
    // The store's other connections stay refused, without scanning again, until its own
    // connection has taken the locks anew.
    assert_eq!(guard.check().unwrap_err().code(), "ERR_FILE_SHARED");
    assert_eq!(guard.scans(), 2);
    Ok(())
}

#[test]
fn admit_refuses_writes_while_the_handle_is_open_then_asks_for_the_reopen() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, _) = family(&dir, "state.sqlite");
    File::create(&db)?;
    let guard = FileGuard::open(&db)?;
    assert_eq!(guard.admit(true)?, Admit::Go);
    let foreign = File::open(&db)?;
    assert_eq!(guard.admit(true).unwrap_err().code(), "ERR_FILE_SHARED");
    assert!(guard.is_refused());
    // A read goes on while the handle is open.
    assert_eq!(guard.admit(false)?, Admit::Go);
    assert_eq!(guard.admit(true).unwrap_err().code(), "ERR_FILE_SHARED");
    drop(foreign);
    // Gone: the store's connection reopens, after which the guard is clear.
    assert_eq!(guard.admit(true)?, Admit::Reopen);
    assert_eq!(guard.admit(false)?, Admit::Reopen);
    assert!(guard.released());
    guard.restored();
    assert!(!guard.is_refused());
    assert_eq!(guard.admit(true)?, Admit::Go);
    guard.check()?;
    Ok(())
}
