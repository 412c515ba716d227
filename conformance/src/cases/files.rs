//! files.* and tar.*: what is written reads back, stat and list agree,
//! directories move and go, errors carry their kinds, and a tree pulled as
//! tar pushes back whole.

use computerd::client::{ComputerExt, WriteFileOptions};
use computerd::protocol::{
    Bytes64, Call, ErrorKind, FileType, FilesListParams, FilesMkdirParams, FilesMoveParams,
    FilesReadParams, FilesRemoveParams, FilesStatParams, FilesWriteParams, TarPullBeginParams,
};

use crate::ctx::{Computer, Ctx, Outcome, ensure, fail};

/// Bytes of every value, and more than one chunk's worth.
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// `path` made with its parents.
async fn mkdir_p(t: &Ctx, c: &Computer, path: &str) -> Result<(), Outcome> {
    t.call(
        c,
        &FilesMkdirParams {
            path: path.into(),
            parents: Some(true),
            mode: None,
        },
    )
    .await?;
    Ok(())
}

async fn write(t: &Ctx, c: &Computer, path: &str, data: &[u8]) -> Result<(), Outcome> {
    c.conn
        .client
        .write_file(
            path,
            data,
            WriteFileOptions {
                mode: None,
                parents: true,
            },
        )
        .await
        .map_err(|e| Outcome::Fail(format!("writing {path} failed: {e}")))?;
    let _ = t;
    Ok(())
}

async fn read(c: &Computer, path: &str) -> Result<Vec<u8>, Outcome> {
    c.conn
        .client
        .read_file(path)
        .await
        .map_err(|e| Outcome::Fail(format!("reading {path} failed: {e}")))
}

pub async fn write_read(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    let path = format!("{dir}/data.bin");
    let data = payload(1_300_000);
    write(t, c, &path, &data).await?;
    let back = read(c, &path).await?;
    ensure(back == data, || {
        format!(
            "{} bytes written read back as {} bytes{}",
            data.len(),
            back.len(),
            if back.len() == data.len() {
                ", not the same"
            } else {
                ""
            }
        )
    })?;
    // A read at an offset, and an append.
    let part = t
        .call(
            c,
            &FilesReadParams {
                path: path.clone(),
                offset: Some(1000),
                length: Some(10),
            },
        )
        .await?;
    ensure(part.data.0 == data[1000..1010], || {
        format!("a 10-byte read at 1000 gave {:?}", part.data.0)
    })?;
    t.call(
        c,
        &FilesWriteParams {
            path: path.clone(),
            data: Bytes64(b"tail".to_vec()),
            offset: None,
            append: Some(true),
            mode: None,
            parents: None,
        },
    )
    .await?;
    let st = t.call(c, &FilesStatParams { path, follow: None }).await?;
    ensure(st.size == data.len() as u64 + 4, || {
        format!(
            "after a 4-byte append the size is {}, want {}",
            st.size,
            data.len() + 4
        )
    })
}

pub async fn stat_list(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    write(t, c, &format!("{dir}/a.txt"), b"alpha").await?;
    t.call(
        c,
        &FilesWriteParams {
            path: format!("{dir}/sub/b.txt"),
            data: Bytes64(b"bee".to_vec()),
            offset: None,
            append: None,
            mode: Some(0o600),
            parents: Some(true),
        },
    )
    .await?;
    let st = t
        .call(
            c,
            &FilesStatParams {
                path: format!("{dir}/sub/b.txt"),
                follow: None,
            },
        )
        .await?;
    ensure(
        st.file_type == FileType::File && st.size == 3 && st.mode == 0o600,
        || format!("sub/b.txt stats as {st:?}; want a 3-byte file, mode 0600"),
    )?;
    let l = t
        .call(
            c,
            &FilesListParams {
                path: dir.clone(),
                depth: Some(2),
                offset: None,
            },
        )
        .await?;
    let mut names: Vec<String> = l
        .entries
        .iter()
        .map(|e| e.path.trim_start_matches(&format!("{dir}/")).to_string())
        .collect();
    names.sort();
    ensure(names == ["a.txt", "sub", "sub/b.txt"], || {
        format!("the listing of depth 2 is {names:?}, want [a.txt, sub, sub/b.txt]")
    })
}

pub async fn mkdir_move_remove(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    mkdir_p(t, c, &format!("{dir}/x/y")).await?;
    write(t, c, &format!("{dir}/x/y/f"), b"f").await?;
    t.call(
        c,
        &FilesMoveParams {
            from: format!("{dir}/x"),
            to: format!("{dir}/z"),
            overwrite: None,
        },
    )
    .await?;
    ensure(read(c, &format!("{dir}/z/y/f")).await? == b"f", || {
        "the moved file does not read back".into()
    })?;
    t.call(
        c,
        &FilesRemoveParams {
            path: format!("{dir}/z"),
            recursive: Some(true),
        },
    )
    .await?;
    match t
        .try_call(
            c,
            &FilesStatParams {
                path: format!("{dir}/z"),
                follow: None,
            },
        )
        .await
    {
        Err(e) if e.kind() == Some(ErrorKind::NotFound) => Ok(()),
        other => fail(format!("a removed directory still stats: {other:?}")),
    }
}

/// A line for what `params` came to unless it was refused as `kind`
/// (`word` on the wire); `what` says what was asked.
async fn unless_refused<P: Call>(
    t: &Ctx,
    c: &Computer,
    params: &P,
    (kind, word): (ErrorKind, &str),
    what: &str,
) -> Option<String>
where
    P::Result: std::fmt::Debug,
{
    let r = t.try_call(c, params).await;
    (r.as_ref().err().and_then(|e| e.kind()) != Some(kind))
        .then(|| format!("{what} gave {r:?}, not {word}"))
}

pub async fn error_kinds(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    let read = |path: String| FilesReadParams {
        path,
        offset: None,
        length: None,
    };
    let mkdir = FilesMkdirParams {
        path: dir.clone(),
        parents: None,
        mode: None,
    };
    let wrong: Vec<String> = [
        unless_refused(
            t,
            c,
            &read(format!("{dir}/missing")),
            (ErrorKind::NotFound, "not_found"),
            "reading a missing file",
        )
        .await,
        unless_refused(
            t,
            c,
            &read(dir.clone()),
            (ErrorKind::IsDir, "is_dir"),
            "reading a directory",
        )
        .await,
        unless_refused(
            t,
            c,
            &mkdir,
            (ErrorKind::Exists, "exists"),
            "making a directory that exists",
        )
        .await,
        unless_refused(
            t,
            c,
            &read("relative".into()),
            (ErrorKind::Invalid, "invalid"),
            "a relative path",
        )
        .await,
    ]
    .into_iter()
    .flatten()
    .collect();
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn tar_round_trip(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    let big = payload(700_000);
    write(t, c, &format!("{dir}/src/one.txt"), b"one").await?;
    mkdir_p(t, c, &format!("{dir}/src/deep/er")).await?;
    write(t, c, &format!("{dir}/src/deep/er/big.bin"), &big).await?;
    let archive = c
        .conn
        .client
        .pull_tar_bytes(&format!("{dir}/src"))
        .await
        .map_err(|e| Outcome::Fail(format!("tar.pull of {dir}/src failed: {e}")))?;
    ensure(archive.len() > big.len(), || {
        format!(
            "the archive of {} bytes of files is {} bytes",
            big.len() + 3,
            archive.len()
        )
    })?;
    let chunks = futures::stream::iter(
        archive
            .chunks(200_000)
            .map(|c| Ok::<_, std::convert::Infallible>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let entries = c
        .conn
        .client
        .push_tar(&format!("{dir}/dst"), chunks)
        .await
        .map_err(|e| Outcome::Fail(format!("tar.push into {dir}/dst failed: {e}")))?;
    ensure(entries >= 2, || {
        format!("the push extracted {entries} entries")
    })?;
    let one = read(c, &format!("{dir}/dst/one.txt")).await;
    let one = match one {
        Ok(v) => v,
        // An archive rooted at the directory's own name.
        Err(_) => read(c, &format!("{dir}/dst/src/one.txt")).await?,
    };
    ensure(one == b"one", || format!("one.txt came back as {one:?}"))?;
    let back = match read(c, &format!("{dir}/dst/deep/er/big.bin")).await {
        Ok(v) => v,
        Err(_) => read(c, &format!("{dir}/dst/src/deep/er/big.bin")).await?,
    };
    ensure(back == big, || {
        format!(
            "big.bin came back as {} bytes, not the {} pulled",
            back.len(),
            big.len()
        )
    })
}

pub async fn tar_missing(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    match t
        .try_call(
            c,
            &TarPullBeginParams {
                path: format!("{dir}/missing"),
            },
        )
        .await
    {
        Err(e) if e.kind() == Some(ErrorKind::NotFound) => Ok(()),
        other => fail(format!(
            "pulling a missing directory gave {other:?}, not not_found"
        )),
    }
}
