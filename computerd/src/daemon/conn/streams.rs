//! A connection's streams: a screenshot read in chunks, and tar pulls and
//! pushes, each a slot of this connection's alone.

use super::*;

type Slot<T> = Arc<tokio::sync::Mutex<Option<T>>>;

/// How a pipelined call of a tar stream is named in its refusals, and how
/// far ahead of the bytes done it may wait.
struct Ahead {
    has: &'static str,
    call: &'static str,
    done: &'static str,
    most: u64,
}

const PULL: Ahead = Ahead {
    has: "the pull has returned",
    call: "read",
    done: "returned",
    most: limits::MAX_PULL_AHEAD_BYTES,
};

const PUSH: Ahead = Ahead {
    has: "the push has",
    call: "write",
    done: "received",
    most: limits::MAX_PUSH_AHEAD_BYTES,
};

/// A pipelined call's `offset` against the `at` bytes done: never a
/// repeat, and at most `ahead.most` ahead.
fn check_offset(offset: u64, at: u64, ahead: &Ahead) -> Result<(), RpcError> {
    if offset < at {
        return Err(RpcError::invalid(format!(
            "offset {offset}: {} {at} bytes already, so this {} would repeat some",
            ahead.has, ahead.call
        ))
        .with_field("offset"));
    }
    if offset - at > ahead.most {
        return Err(RpcError::invalid(format!(
            "offset {offset} is {} bytes past the {at} {}, over the {} a {} may wait ahead",
            offset - at,
            ahead.done,
            ahead.most,
            ahead.call
        ))
        .with_field("offset"));
    }
    Ok(())
}

fn get_slot<T>(
    map: &Mutex<HashMap<String, Slot<T>>>,
    id: &str,
    what: &str,
) -> Result<Slot<T>, RpcError> {
    lock(map).get(id).cloned().ok_or_else(|| {
        RpcError::not_found(format!(
            "no tar {what} {id:?} is open on this connection (it ended, or never began here)"
        ))
        .with_field("id")
    })
}

impl Conn {
    pub(super) async fn screen_shot(
        &self,
        p: protocol::ScreenShotParams,
        cancel: CancellationToken,
    ) -> Result<protocol::ScreenShotResult, RpcError> {
        let shot = self.daemon.display.shot(p.region, p.fit, &cancel).await?;
        let id = format!("s{}", self.daemon.stream_id());
        let png = Arc::new(shot.png);
        let first = png.len().min(limits::MAX_CHUNK_BYTES as usize);
        let eof = first == png.len();
        *lock(&self.shot) = if eof {
            None
        } else {
            Some((id.clone(), Arc::clone(&png)))
        };
        Ok(protocol::ScreenShotResult {
            id,
            format: protocol::ImageFormat::Png,
            data: protocol::Bytes64(png[..first].to_vec()),
            size: png.len() as u64,
            eof,
            width: shot.width,
            height: shot.height,
            screen_width: shot.screen_width,
            screen_height: shot.screen_height,
            scale: shot.scale,
            cursor: shot.cursor,
        })
    }

    pub(super) fn screen_read(
        &self,
        p: protocol::ScreenReadParams,
    ) -> Result<protocol::ScreenReadResult, RpcError> {
        let max = crate::daemon::check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let slot = if p.id.starts_with('w') {
            &self.frame
        } else {
            &self.shot
        };
        let mut held = lock(slot);
        let png = match held.as_ref() {
            Some((id, png)) if *id == p.id => Arc::clone(png),
            _ => {
                return Err(RpcError::not_found(format!(
                    "no shot or frame {:?} is held on this connection (it was read to its end, or a later one replaced it)",
                    p.id
                ))
                .with_field("id"));
            }
        };
        if p.offset > png.len() as u64 {
            return Err(RpcError::invalid_field(
                "offset",
                format!("offset {} is past the shot's {} bytes", p.offset, png.len()),
            ));
        }
        let from = p.offset as usize;
        let to = from.saturating_add(max as usize).min(png.len());
        let eof = to == png.len();
        if eof {
            *held = None;
        }
        Ok(protocol::ScreenReadResult {
            data: protocol::Bytes64(png[from..to].to_vec()),
            eof,
        })
    }

    pub(super) async fn pull_begin(
        &self,
        p: protocol::TarPullBeginParams,
    ) -> Result<TarStreamId, RpcError> {
        if lock(&self.pulls).len() >= limits::MAX_PULLS_PER_CONNECTION {
            return Err(too_many("pulls", limits::MAX_PULLS_PER_CONNECTION));
        }
        let pull = blocking(move || tar::Pull::begin(&p.path)).await?;
        let mut pulls = lock(&self.pulls);
        if pulls.len() >= limits::MAX_PULLS_PER_CONNECTION {
            return Err(too_many("pulls", limits::MAX_PULLS_PER_CONNECTION));
        }
        let id = self.daemon.stream_id();
        pulls.insert(
            id.clone(),
            Arc::new(PullSlot {
                pull: tokio::sync::Mutex::new(Some(pull)),
                at: tokio::sync::watch::Sender::new((0, false)),
            }),
        );
        Ok(TarStreamId { id })
    }

    pub(super) async fn pull_read(
        &self,
        p: protocol::TarPullReadParams,
        cancel: CancellationToken,
    ) -> Result<protocol::TarPullReadResult, RpcError> {
        let max = crate::daemon::check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let slot = lock(&self.pulls).get(&p.id).cloned().ok_or_else(|| {
            RpcError::not_found(format!(
                "no tar pull {:?} is open on this connection (it ended, or never began here)",
                p.id
            ))
            .with_field("id")
        })?;
        let ended =
            || RpcError::not_found(format!("tar pull {:?} has ended", p.id)).with_field("id");
        if let Some(offset) = p.offset {
            let (at, done) = *slot.at.borrow();
            check_offset(offset, at, &PULL)?;
            if offset > at && !done {
                // The reads before it are still on their way: wait for them
                // without holding the pull.
                let mut progress = slot.at.subscribe();
                tokio::select! {
                    r = progress.wait_for(|&(a, d)| a >= offset || d) => {
                        if r.is_err() {
                            return Err(ended());
                        }
                    }
                    _ = cancel.cancelled() => {
                        return Err(RpcError::aborted(format!(
                            "tar.pull.read at offset {offset} was cancelled while it waited for the reads before it"
                        )));
                    }
                }
            }
        }
        let mut guard = slot.pull.lock().await;
        if let Some(offset) = p.offset {
            // Past the end or a failure, a read ahead reads on: it gets
            // the end (no bytes, eof) or the failure again.
            check_offset(offset, slot.at.borrow().0, &PULL)?;
        }
        let Some(mut pull) = guard.take() else {
            return Err(ended());
        };
        let (pull, r) = tokio::task::spawn_blocking(move || {
            let r = pull.read(max as usize);
            (pull, r)
        })
        .await
        .map_err(|e| RpcError::invalid(format!("the pull failed inside the daemon: {e}")))?;
        *guard = Some(pull);
        let r = r.inspect_err(|_| slot.finish());
        let (data, eof) = r?;
        slot.at.send_modify(|(at, done)| {
            *at += data.len() as u64;
            *done |= eof;
        });
        Ok(protocol::TarPullReadResult {
            data: protocol::Bytes64(data),
            eof,
        })
    }

    pub(super) async fn pull_end(&self, p: protocol::TarPullEndParams) -> Result<Empty, RpcError> {
        // Ending twice is fine: the second finds nothing and says nothing.
        let slot = lock(&self.pulls).remove(&p.id);
        if let Some(slot) = slot {
            slot.finish();
            slot.pull.lock().await.take();
        }
        Ok(Empty {})
    }

    pub(super) async fn push_begin(
        &self,
        p: protocol::TarPushBeginParams,
    ) -> Result<TarStreamId, RpcError> {
        if lock(&self.pushes).len() >= limits::MAX_PUSHES_PER_CONNECTION {
            return Err(too_many("pushes", limits::MAX_PUSHES_PER_CONNECTION));
        }
        let push = blocking(move || tar::Push::begin(&p.path)).await?;
        let mut pushes = lock(&self.pushes);
        if pushes.len() >= limits::MAX_PUSHES_PER_CONNECTION {
            push.abort();
            return Err(too_many("pushes", limits::MAX_PUSHES_PER_CONNECTION));
        }
        let id = self.daemon.stream_id();
        pushes.insert(id.clone(), Arc::new(tokio::sync::Mutex::new(Some(push))));
        Ok(TarStreamId { id })
    }

    pub(super) async fn push_write(
        &self,
        p: protocol::TarPushWriteParams,
    ) -> Result<Empty, RpcError> {
        if p.data.len() as u64 > limits::MAX_WRITE_BYTES {
            return Err(RpcError::over_limit(
                "data",
                p.data.len() as u64,
                limits::MAX_WRITE_BYTES,
            ));
        }
        let slot = get_slot(&self.pushes, &p.id, "push")?;
        let ended =
            || RpcError::not_found(format!("tar push {:?} has ended", p.id)).with_field("id");
        let mut data = Some(p.data.into_inner());
        let sent = loop {
            let mut guard = slot.lock().await;
            let push = guard.as_mut().ok_or_else(ended)?;
            if let Some(offset) = p.offset {
                let at = push.received();
                check_offset(offset, at, &PUSH)?;
                if offset > at {
                    // The writes before it are still on their way: wait for
                    // them without holding the push.
                    let mut progress = push.progress();
                    drop(guard);
                    if progress.wait_for(|&r| r >= offset).await.is_err() {
                        return Err(ended());
                    }
                    continue;
                }
            }
            break push.send(data.take().unwrap_or_default()).await;
        };
        // Waited for outside the lock, so the next write can go on to the
        // extractor while this one's bytes are used.
        match sent {
            tar::push::Sent::Done(r) => r.map(|()| Empty {}),
            tar::push::Sent::Waiting(w) => {
                if w.consumed().await {
                    return Ok(Empty {});
                }
                match slot.lock().await.as_mut() {
                    Some(push) => push.settle().await.map(|_| Empty {}),
                    None => Err(ended()),
                }
            }
        }
    }

    pub(super) async fn push_end(
        &self,
        p: protocol::TarPushEndParams,
    ) -> Result<protocol::TarPushEndResult, RpcError> {
        let slot = lock(&self.pushes).remove(&p.id).ok_or_else(|| {
            RpcError::not_found(format!("no tar push {:?} is open on this connection", p.id))
                .with_field("id")
        })?;
        let push = slot.lock().await.take();
        match push {
            Some(push) => push
                .end()
                .await
                .map(|entries| protocol::TarPushEndResult { entries }),
            None => {
                Err(RpcError::not_found(format!("tar push {:?} has ended", p.id)).with_field("id"))
            }
        }
    }
}

/// The refusal of a pull or push begun while `most` are open.
fn too_many(what: &str, most: usize) -> RpcError {
    RpcError::limit(format!(
        "{most} tar {what} are already open on this connection; end one first"
    ))
}
