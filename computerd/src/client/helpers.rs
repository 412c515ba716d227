//! Helpers that go past one call: whole files, tar streams, process output.

use futures::{Stream, StreamExt};

use super::{ClientError, ComputerClient, Result};
use crate::protocol::{
    Bytes64, FilesReadParams, FilesWriteParams, Fit, ProcessReadParams, ProcessReadResult, Region,
    ScreenReadParams, ScreenShotParams, ScreenShotResult, Stream as OutStream, TarPullBeginParams,
    TarPullEndParams, TarPullReadParams, TarPullReadResult, TarPushBeginParams, TarPushEndParams,
    TarPushWriteParams, WithData, limits,
};
use serde_json::Value;

/// How many tar.pull.read calls a pull keeps on their way at once (2 MiB),
/// once the daemon showed it takes their `offset`.
const PULL_WINDOW: usize = 4;

/// How many tar.push.write calls a push keeps on their way at once (4 MiB,
/// well inside the daemon's 16 MiB ahead).
const PUSH_WINDOW: usize = 8;

/// Options of [`ComputerExt::write_file`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteFileOptions {
    /// Permission bits, set with the last chunk (so a read-only file of any size can be written).
    pub mode: Option<u32>,
    /// Make missing parent directories.
    pub parents: bool,
}

/// All of a process stream read so far, from [`ComputerExt::read_process_output`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessOutput {
    pub data: Vec<u8>,
    /// Where the next read would start.
    pub next_offset: u64,
    /// Bytes lost to the ring between the first offset and what was read.
    pub dropped: u64,
    /// The process ended and its stream was read to the end.
    pub exited: bool,
}

/// One step of [`ProcessFollow`].
#[derive(Clone, Debug, PartialEq)]
pub struct FollowChunk {
    pub data: Vec<u8>,
    pub dropped: u64,
    pub next_offset: u64,
}

/// What goes past one call, for any client: whole files, tar streams,
/// process output. Implemented for every cloneable [`ComputerClient`]
/// (`DaemonClient`, `Arc<dyn ComputerClient>`).
pub trait ComputerExt: ComputerClient + Clone + Sized + 'static {
    /// Call a method by its typed params.
    fn call_typed<P: crate::protocol::Call>(
        &self,
        params: &P,
    ) -> impl std::future::Future<Output = Result<P::Result>> + Send {
        // Encoded before the future, so it holds no reference to the params.
        let value = serde_json::to_value(params).map_err(|e| ClientError::Decode {
            method: P::METHOD.as_str().to_string(),
            detail: format!("params could not be encoded: {e}"),
        });
        async move {
            let reply = self.call_value(P::METHOD.as_str(), value?).await?;
            serde_json::from_value(reply).map_err(|e| ClientError::Decode {
                method: P::METHOD.as_str().to_string(),
                detail: e.to_string(),
            })
        }
    }

    /// Call a method whose params' `data` may go as a bytes frame (see
    /// [`ComputerClient::call_bytes`]).
    fn call_sending_data<P: crate::protocol::Call + WithData + Send>(
        &self,
        mut params: P,
    ) -> impl std::future::Future<Output = Result<P::Result>> + Send {
        let data = std::mem::take(params.data_mut()).into_inner();
        let value = encode_params::<P>(&params).map(|mut v| {
            if let Value::Object(map) = &mut v {
                map.remove("data");
            }
            v
        });
        async move {
            let reply = self
                .call_bytes(P::METHOD.as_str(), value?, Some(data), false)
                .await?;
            decode_result::<P>(reply.result)
        }
    }

    /// Call a method whose result's `data` may come as a bytes frame.
    fn call_taking_data<P: crate::protocol::Call + Sync>(
        &self,
        params: &P,
    ) -> impl std::future::Future<Output = Result<P::Result>> + Send
    where
        P::Result: WithData,
    {
        async move { taking_data(self, params).await.map(|(r, _)| r) }
    }

    /// Read a whole file, a chunk per call.
    fn read_file(&self, path: &str) -> impl std::future::Future<Output = Result<Vec<u8>>> + Send {
        async move {
            let mut out = Vec::new();
            loop {
                let r = self
                    .call_taking_data(&FilesReadParams {
                        path: path.to_string(),
                        offset: Some(out.len() as u64),
                        length: Some(limits::MAX_CHUNK_BYTES),
                    })
                    .await?;
                let got = r.data.len();
                out.extend_from_slice(&r.data);
                if r.eof || got == 0 {
                    return Ok(out);
                }
            }
        }
    }

    /// Write a whole file of any size: the first chunk replaces the file,
    /// the next ones write at their offsets, and the mode comes with the last.
    fn write_file(
        &self,
        path: &str,
        bytes: &[u8],
        opts: WriteFileOptions,
    ) -> impl std::future::Future<Output = Result<u64>> + Send {
        async move {
            let chunk = limits::MAX_WRITE_BYTES as usize;
            let mut offset = 0usize;
            loop {
                let end = (offset + chunk).min(bytes.len());
                let last = end == bytes.len();
                let r = self
                    .call_sending_data(FilesWriteParams {
                        path: path.to_string(),
                        data: Bytes64(bytes[offset..end].to_vec()),
                        offset: (offset > 0).then_some(offset as u64),
                        append: None,
                        mode: if last { opts.mode } else { None },
                        parents: (offset == 0 && opts.parents).then_some(true),
                    })
                    .await?;
                if last {
                    return Ok(r.size);
                }
                offset = end;
            }
        }
    }

    /// Push a tar archive from a byte stream into `dir` (made if missing).
    /// A chunk of at most 512 KiB goes as one write, without a copy.
    /// Returns the entries extracted. The push is ended however this ends,
    /// and the source is not read past the first failure.
    fn push_tar<S, B, E>(
        &self,
        dir: &str,
        source: S,
    ) -> impl std::future::Future<Output = Result<u64>> + Send
    where
        S: Stream<Item = std::result::Result<B, E>> + Send,
        B: Into<Vec<u8>> + Send,
        E: std::fmt::Display + Send,
    {
        async move {
            let id = self
                .call_typed(&TarPushBeginParams {
                    path: dir.to_string(),
                })
                .await?
                .id;
            let end = EndOnDrop::push(self, &id);
            let fed = self.feed_push(&id, source).await;
            end.disarm();
            let ended = self.call_typed(&TarPushEndParams { id: id.clone() }).await;
            fed?;
            Ok(ended?.entries)
        }
    }

    fn feed_push<S, B, E>(
        &self,
        id: &str,
        source: S,
    ) -> impl std::future::Future<Output = Result<()>> + Send
    where
        S: Stream<Item = std::result::Result<B, E>> + Send,
        B: Into<Vec<u8>> + Send,
        E: std::fmt::Display + Send,
    {
        async move {
            let max = limits::MAX_WRITE_BYTES as usize;
            let mut source = std::pin::pin!(source);
            // Pipelined: up to PUSH_WINDOW writes on their way at once, each
            // with its offset, so the daemon extracts one while the next
            // ones travel and decode.
            let mut on_the_way = futures::stream::FuturesOrdered::new();
            let mut offset = 0u64;
            while let Some(item) = source.next().await {
                let bytes =
                    item.map_err(|e| ClientError::Source(format!("the tar source failed: {e}")))?;
                let bytes: Vec<u8> = bytes.into();
                // A chunk that fits one write goes as it is, without a copy.
                let pieces: Vec<Vec<u8>> = if bytes.len() <= max {
                    vec![bytes]
                } else {
                    bytes.chunks(max).map(<[u8]>::to_vec).collect()
                };
                for piece in pieces {
                    if on_the_way.len() >= PUSH_WINDOW
                        && let Some(done) = on_the_way.next().await
                    {
                        done?;
                    }
                    let len = piece.len() as u64;
                    let params = TarPushWriteParams {
                        id: id.to_string(),
                        data: Bytes64(piece),
                        offset: Some(offset),
                    };
                    offset += len;
                    on_the_way.push_back(self.call_sending_data(params));
                }
            }
            while let Some(done) = on_the_way.next().await {
                done?;
            }
            Ok(())
        }
    }

    /// Begin pulling `path` as a tar archive. Each [`TarPull::next`] is one
    /// tar.pull.read, so a slow reader holds back only its own pull.
    fn pull_tar(
        &self,
        path: &str,
    ) -> impl std::future::Future<Output = Result<TarPull<Self>>> + Send {
        async move {
            let id = self
                .call_typed(&TarPullBeginParams {
                    path: path.to_string(),
                })
                .await?
                .id;
            Ok(TarPull {
                client: self.clone(),
                id,
                done: false,
                ahead: futures::stream::FuturesOrdered::new(),
                pipelined: false,
                received: 0,
                next_offset: 0,
            })
        }
    }

    /// Pull a whole archive into memory.
    fn pull_tar_bytes(
        &self,
        path: &str,
    ) -> impl std::future::Future<Output = Result<Vec<u8>>> + Send {
        async move {
            let mut pull = self.pull_tar(path).await?;
            let mut out = Vec::new();
            while let Some(chunk) = pull.next().await? {
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        }
    }

    /// Read a process stream from `offset` until the process has ended and
    /// the stream is read to its end, waiting on the daemon between chunks.
    fn read_process_output(
        &self,
        id: &str,
        stream: OutStream,
        offset: u64,
    ) -> impl std::future::Future<Output = Result<ProcessOutput>> + Send {
        async move {
            let mut out = ProcessOutput {
                next_offset: offset,
                ..Default::default()
            };
            let mut follow = self.follow_process(id, stream, offset);
            while let Some(chunk) = follow.next().await? {
                out.data.extend_from_slice(&chunk.data);
                out.dropped += chunk.dropped;
                out.next_offset = chunk.next_offset;
            }
            out.exited = true;
            Ok(out)
        }
    }

    /// A whole screenshot: screen.shot, then screen.read for the rest of
    /// the PNG. The shot's first reply comes back with the whole PNG.
    fn screen_shot(
        &self,
        region: Option<Region>,
    ) -> impl std::future::Future<Output = Result<(ScreenShotResult, Vec<u8>)>> + Send {
        self.screen_shot_within(region, None)
    }

    /// [`screen_shot`](Self::screen_shot) asking for an image within `fit`
    /// (which a client that scales before it encodes keeps to).
    fn screen_shot_within(
        &self,
        region: Option<Region>,
        fit: Option<Fit>,
    ) -> impl std::future::Future<Output = Result<(ScreenShotResult, Vec<u8>)>> + Send {
        async move {
            let r = self.call_typed(&ScreenShotParams { region, fit }).await?;
            let mut png = r.data.0.clone();
            let mut eof = r.eof;
            while !eof {
                let more = self
                    .call_typed(&ScreenReadParams {
                        id: r.id.clone(),
                        offset: png.len() as u64,
                        max_bytes: None,
                    })
                    .await?;
                if more.data.is_empty() && !more.eof {
                    return Err(unreadable::<ScreenReadParams>(format!(
                        "the screenshot stopped short at {} of its {} bytes",
                        png.len(),
                        r.size
                    )));
                }
                png.extend_from_slice(&more.data.0);
                eof = more.eof;
            }
            Ok((r, png))
        }
    }

    /// Follow a process stream chunk by chunk, with one long-poll read in flight.
    fn follow_process(&self, id: &str, stream: OutStream, offset: u64) -> ProcessFollow<Self> {
        ProcessFollow {
            client: self.clone(),
            id: id.to_string(),
            stream,
            offset,
            done: false,
        }
    }
}

/// A call whose result's `data` may come as a bytes frame; true when it did
/// (the daemon speaks frames, and with them a pull's `offset`).
async fn taking_data<C: ComputerClient + ?Sized, P: crate::protocol::Call + Sync>(
    client: &C,
    params: &P,
) -> Result<(P::Result, bool)>
where
    P::Result: WithData,
{
    let value = encode_params::<P>(params)?;
    let reply = client
        .call_bytes(P::METHOD.as_str(), value, None, true)
        .await?;
    let Some(data) = reply.data else {
        return decode_result::<P>(reply.result).map(|r| (r, false));
    };
    let mut result = reply.result;
    if let Value::Object(map) = &mut result {
        // A stand-in that decodes to no bytes; the frame's go in after.
        map.insert("data".into(), Value::String(String::new()));
    }
    let mut r = decode_result::<P>(result)?;
    *r.data_mut() = Bytes64(data);
    Ok((r, true))
}

fn encode_params<P: crate::protocol::Call>(params: &P) -> Result<Value> {
    serde_json::to_value(params)
        .map_err(|e| unreadable::<P>(format!("params could not be encoded: {e}")))
}

fn decode_result<P: crate::protocol::Call>(value: Value) -> Result<P::Result> {
    serde_json::from_value(value).map_err(|e| unreadable::<P>(e.to_string()))
}

/// A call of `P` that could not be read or written as the protocol says.
fn unreadable<P: crate::protocol::Call>(detail: String) -> ClientError {
    ClientError::Decode {
        method: P::METHOD.as_str().to_string(),
        detail,
    }
}

/// A tar pull in progress. Ended on its last chunk, by [`TarPull::end`], or when dropped.
pub struct TarPull<C: ComputerClient + Clone + 'static> {
    client: C,
    id: String,
    done: bool,
    /// Reads on their way, in offset order.
    ahead: futures::stream::FuturesOrdered<PullRead>,
    /// The daemon answered a read in a bytes frame: it takes `offset`, so
    /// reads go ahead of each other's answers.
    pipelined: bool,
    /// Bytes of the archive returned so far.
    received: u64,
    /// Where the next read sent ahead starts.
    next_offset: u64,
}

/// One tar.pull.read on its way: its result, and whether it came in a frame.
type PullRead = futures::future::BoxFuture<'static, Result<(TarPullReadResult, bool)>>;

impl<C: ComputerClient + Clone + 'static> TarPull<C> {
    /// The next chunk of the archive; `None` at its end.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        let window = if self.pipelined { PULL_WINDOW } else { 1 };
        while self.ahead.len() < window {
            self.send_read();
        }
        let read = match self.ahead.next().await {
            Some(read) => read,
            None => Err(ClientError::Closed("the pull's reads stopped".into())),
        };
        let read = read.and_then(|(r, framed)| {
            let sent_ahead = self.pipelined;
            if sent_ahead && !r.eof && r.data.len() as u64 != limits::MAX_CHUNK_BYTES {
                return Err(unreadable::<TarPullReadParams>(format!(
                    "a read before the end returned {} bytes, not the {} asked, so the reads sent ahead of it cannot follow",
                    r.data.len(),
                    limits::MAX_CHUNK_BYTES
                )));
            }
            self.received += r.data.len() as u64;
            if framed && !self.pipelined {
                self.pipelined = true;
                self.next_offset = self.received;
            }
            Ok(r)
        });
        match read {
            Ok(r) => {
                if r.eof {
                    // Reads sent past the end are dropped (and so cancelled).
                    self.ahead = futures::stream::FuturesOrdered::new();
                    self.end().await?;
                }
                if r.data.is_empty() && self.done {
                    return Ok(None);
                }
                Ok(Some(r.data.into_inner()))
            }
            Err(e) => {
                self.ahead = futures::stream::FuturesOrdered::new();
                let _ = self.end().await;
                Err(e)
            }
        }
    }

    /// Send the next read: at its offset once the daemon takes them.
    fn send_read(&mut self) {
        let offset = self.pipelined.then_some(self.next_offset);
        if self.pipelined {
            self.next_offset += limits::MAX_CHUNK_BYTES;
        }
        let params = TarPullReadParams {
            id: self.id.clone(),
            max_bytes: Some(limits::MAX_CHUNK_BYTES),
            offset,
        };
        let client = self.client.clone();
        self.ahead
            .push_back(Box::pin(async move { taking_data(&client, &params).await }));
    }

    /// Stop the pull and free it in the daemon.
    pub async fn end(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        self.client
            .call_typed(&TarPullEndParams {
                id: self.id.clone(),
            })
            .await
            .map(|_| ())
    }

    /// The chunks as a `Stream`.
    pub fn into_stream(self) -> impl Stream<Item = Result<Vec<u8>>> {
        futures::stream::unfold(Some(self), |state| async move {
            let mut pull = state?;
            match pull.next().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(pull))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}

impl<C: ComputerClient + Clone + 'static> Drop for TarPull<C> {
    fn drop(&mut self) {
        if !self.done {
            drop(EndOnDrop {
                client: &self.client,
                method: End::Pull,
                id: self.id.clone(),
                armed: true,
            });
        }
    }
}

/// Following a process stream; see [`ComputerExt::follow_process`].
pub struct ProcessFollow<C: ComputerClient + Clone + 'static> {
    client: C,
    id: String,
    stream: OutStream,
    offset: u64,
    done: bool,
}

impl<C: ComputerClient + Clone + 'static> ProcessFollow<C> {
    /// The next bytes, waiting up to 30 s at a time for them; `None` once the
    /// process has ended and the stream is read to its end.
    pub async fn next(&mut self) -> Result<Option<FollowChunk>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let r: ProcessReadResult = self
                .client
                .call_typed(&ProcessReadParams {
                    id: self.id.clone(),
                    stream: self.stream,
                    offset: self.offset,
                    max_bytes: Some(limits::MAX_CHUNK_BYTES),
                    wait_ms: Some(limits::MAX_WAIT_MS),
                })
                .await?;
            self.offset = r.next_offset;
            self.done = r.exited;
            if !r.data.is_empty() || r.dropped > 0 {
                return Ok(Some(FollowChunk {
                    data: r.data.into_inner(),
                    dropped: r.dropped,
                    next_offset: r.next_offset,
                }));
            }
        }
    }

    /// Where the next read starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

#[derive(Clone, Copy)]
enum End {
    Pull,
    Push,
}

/// Ends a pull or push in the background when the future that owned it is dropped.
struct EndOnDrop<'a, C: ComputerClient + Clone + 'static> {
    client: &'a C,
    method: End,
    id: String,
    armed: bool,
}

impl<'a, C: ComputerClient + Clone + 'static> EndOnDrop<'a, C> {
    fn push(client: &'a C, id: &str) -> Self {
        Self {
            client,
            method: End::Push,
            id: id.to_string(),
            armed: true,
        }
    }
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl<C: ComputerClient + Clone + 'static> Drop for EndOnDrop<'_, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let client = self.client.clone();
        let id = std::mem::take(&mut self.id);
        let method = self.method;
        // Without a runtime there is nothing to send with; the daemon ends
        // the stream with the connection anyway.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = match method {
                    End::Pull => client
                        .call_typed(&TarPullEndParams { id })
                        .await
                        .map(|_| ()),
                    End::Push => client
                        .call_typed(&TarPushEndParams { id })
                        .await
                        .map(|_| ()),
                };
            });
        }
    }
}

impl<T: ComputerClient + Clone + 'static> ComputerExt for T {}
