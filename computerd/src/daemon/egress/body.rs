//! Plain HTTP carries one request per connection: where the request's body
//! ends, read from its head (RFC 9112 §6), so that not one byte past it
//! reaches the host. A second request pipelined on the connection (or
//! smuggled in a body whose length two headers disagree on) would reach
//! the first request's address under a `Host` nobody checked.

use tokio::net::TcpStream;

use super::handoff::Client;
use super::head::{Head, HeadError};
use super::splice::{self, Activity, Side};

/// The longest chunk-size line (with its extensions) and the most trailer
/// bytes taken in a chunked body.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILER: usize = 16 * 1024;

/// How a request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `Content-Length: n` (no header: 0).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

fn bad(words: impl Into<String>) -> HeadError {
    HeadError {
        status: 400,
        words: words.into(),
    }
}

/// The request's framing, or why it is refused: both length headers (RFC
/// 9112 §6.3 calls such a message smuggling, and a proxy may not forward
/// it), a transfer coding other than plain `chunked`, or lengths that do
/// not agree.
pub fn framing(h: &Head) -> Result<Body, HeadError> {
    let te: Vec<&str> = h.headers_named("transfer-encoding").collect();
    let cl: Vec<&str> = h.headers_named("content-length").collect();
    if !te.is_empty() && !cl.is_empty() {
        return Err(bad(
            "the request has both Content-Length and Transfer-Encoding, which RFC 9112 refuses (a body two ways long): send one of them",
        ));
    }
    if !te.is_empty() {
        return if te.len() == 1 && te[0].eq_ignore_ascii_case("chunked") {
            Ok(Body::Chunked)
        } else {
            Err(HeadError {
                status: 501,
                words: "the only Transfer-Encoding taken is chunked (one header, no other coding)"
                    .into(),
            })
        };
    }
    let mut length = None;
    for v in cl.iter().flat_map(|v| v.split(',')).map(str::trim) {
        let n = (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .then(|| v.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| bad("Content-Length is not a number of bytes"))?;
        if length.is_some_and(|m| m != n) {
            return Err(bad("the request's Content-Length values differ"));
        }
        length = Some(n);
    }
    Ok(Body::Length(length.unwrap_or(0)))
}

/// Carry one request's body to the host and the host's answer back, then
/// end: the request's head went before, `early` is what the program sent
/// past it. Bytes past the body's end are never sent; the program that
/// pipelined another request gets this one's answer and the end of the
/// connection, and sends the next on a connection of its own, checked
/// again. A body that breaks its framing ends both connections.
pub async fn carry_one(mut client: Client, upstream: TcpStream, early: Vec<u8>, body: Body) {
    let seen = Activity::new();
    let up = async {
        match send_body(client.side(), Side::Tcp(&upstream), early, body, &seen).await {
            Ok(()) => std::future::pending::<()>().await,
            Err(why) => tracing::info!("egress: a plain-HTTP request was ended: {why}"),
        }
    };
    tokio::select! {
        _ = up => {}
        _ = splice::pump(Side::Tcp(&upstream), client.side(), &seen) => {}
        _ = seen.idle_for(super::IDLE) => {
            tracing::info!(
                "egress: a request moved no byte either way for {} s and was ended",
                super::IDLE.as_secs()
            );
        }
    }
    drop(upstream);
    super::drain(&mut client).await;
}

async fn send_body(
    client: Side<'_>,
    upstream: Side<'_>,
    mut buf: Vec<u8>,
    body: Body,
    seen: &Activity,
) -> Result<(), String> {
    let mut framer = Framer::new(body);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = framer.feed(&buf)?;
        if n > 0 {
            upstream
                .write_all(&buf[..n])
                .await
                .map_err(|e| format!("the host stopped taking the body ({e})"))?;
            seen.touch();
        }
        if framer.done() {
            return Ok(());
        }
        let m = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        if m == 0 {
            return Err("the program ended before its request's body did".into());
        }
        seen.touch();
        buf.clear();
        buf.extend_from_slice(&chunk[..m]);
    }
}

/// Where a chunked body stands.
#[derive(Clone, Copy, Debug)]
enum Chunk {
    /// The size line: its digits so far, and its length.
    Size {
        size: Option<u64>,
        ext: bool,
        len: usize,
    },
    SizeLf {
        size: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// After the last chunk: a trailer line (`len` bytes of it so far) or
    /// the empty line that ends the message; `total` trailer bytes in all.
    Trailer {
        len: usize,
        total: usize,
    },
    TrailerLf {
        len: usize,
        total: usize,
    },
    Done,
}

/// Reads a body as it passes and says where it ends.
pub struct Framer {
    length: Option<u64>,
    chunk: Chunk,
}

impl Framer {
    pub fn new(body: Body) -> Self {
        Self {
            length: match body {
                Body::Length(n) => Some(n),
                Body::Chunked => None,
            },
            chunk: Chunk::Size {
                size: None,
                ext: false,
                len: 0,
            },
        }
    }

    pub fn done(&self) -> bool {
        match self.length {
            Some(n) => n == 0,
            None => matches!(self.chunk, Chunk::Done),
        }
    }

    /// How many of `bytes` belong to the body (all of them until its end);
    /// a chunked body that breaks its grammar is an error.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<usize, String> {
        if let Some(left) = self.length.as_mut() {
            let n = (*left).min(bytes.len() as u64);
            *left -= n;
            return Ok(n as usize);
        }
        let mut i = 0;
        while i < bytes.len() && !self.done() {
            let b = bytes[i];
            if let Chunk::Data { left } = self.chunk {
                let n = left.min((bytes.len() - i) as u64);
                i += n as usize;
                self.chunk = if left == n {
                    Chunk::DataCr
                } else {
                    Chunk::Data { left: left - n }
                };
                continue;
            }
            self.chunk = step(self.chunk, b).map_err(str::to_string)?;
            i += 1;
        }
        Ok(i)
    }
}

/// Strict where a lenient host could read the bytes otherwise: a line ends
/// with CR LF only, and a lone LF or CR anywhere is refused, so the proxy
/// and the host never disagree on where the body ends.
fn step(at: Chunk, b: u8) -> Result<Chunk, &'static str> {
    const BAD: &str = "the chunked body breaks its framing";
    if b == b'\n'
        && !matches!(
            at,
            Chunk::SizeLf { .. } | Chunk::DataLf | Chunk::TrailerLf { .. }
        )
    {
        return Err(BAD);
    }
    Ok(match at {
        Chunk::Size { size, ext, len } => {
            if len >= MAX_CHUNK_LINE {
                return Err("a chunk-size line is over 4096 bytes");
            }
            let len = len + 1;
            match (b, size) {
                (b'\r', Some(size)) => Chunk::SizeLf { size },
                (_, _) if ext => Chunk::Size { size, ext, len },
                (b';', Some(_)) | (b' ' | b'\t', Some(_)) => Chunk::Size {
                    size,
                    ext: true,
                    len,
                },
                _ => {
                    let d = (b as char).to_digit(16).ok_or(BAD)?;
                    let size = size.unwrap_or(0).checked_mul(16).ok_or(BAD)? + u64::from(d);
                    Chunk::Size {
                        size: Some(size),
                        ext,
                        len,
                    }
                }
            }
        }
        Chunk::SizeLf { size } if b == b'\n' => match size {
            0 => Chunk::Trailer { len: 0, total: 0 },
            left => Chunk::Data { left },
        },
        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
        Chunk::DataLf if b == b'\n' => Chunk::Size {
            size: None,
            ext: false,
            len: 0,
        },
        Chunk::Trailer { len, total } => {
            if total >= MAX_TRAILER {
                return Err("the chunked body's trailer is over 16 KiB");
            }
            match b {
                b'\r' => Chunk::TrailerLf { len, total },
                _ => Chunk::Trailer {
                    len: len + 1,
                    total: total + 1,
                },
            }
        }
        Chunk::TrailerLf { len, total } if b == b'\n' => match len {
            0 => Chunk::Done,
            _ => Chunk::Trailer {
                len: 0,
                total: total + 2,
            },
        },
        _ => return Err(BAD),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::egress::head::parse_head;

    fn framing_of(headers: &str) -> Result<Body, HeadError> {
        let text = format!("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n{headers}\r\n");
        framing(&parse_head(text.as_bytes()).unwrap())
    }

    #[test]
    fn a_head_says_its_framing_or_is_refused_when_two_lengths_disagree() {
        assert_eq!(framing_of(""), Ok(Body::Length(0)));
        assert_eq!(framing_of("Content-Length: 12\r\n"), Ok(Body::Length(12)));
        assert_eq!(
            framing_of("Content-Length: 3, 3\r\nContent-Length: 3\r\n"),
            Ok(Body::Length(3))
        );
        assert_eq!(
            framing_of("Transfer-Encoding: Chunked\r\n"),
            Ok(Body::Chunked)
        );
        let both = framing_of("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n").unwrap_err();
        assert_eq!(both.status, 400);
        assert!(
            both.words
                .contains("both Content-Length and Transfer-Encoding"),
            "{both:?}"
        );
        for bad in [
            "Content-Length: 3\r\nContent-Length: 4\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: +5\r\n",
            "Content-Length: 99999999999999999999999\r\n",
            "Content-Length: \r\n",
        ] {
            assert_eq!(framing_of(bad).unwrap_err().status, 400, "{bad}");
        }
        for odd in [
            "Transfer-Encoding: gzip, chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        ] {
            assert_eq!(framing_of(odd).unwrap_err().status, 501, "{odd}");
        }
    }

    #[test]
    fn a_body_ends_where_its_framing_says_and_not_a_byte_later() {
        let mut f = Framer::new(Body::Length(5));
        assert_eq!(f.feed(b"hel"), Ok(3));
        assert_eq!(f.feed(b"loGET /next"), Ok(2));
        assert!(f.done());
        assert!(Framer::new(Body::Length(0)).done());

        let chunked = b"5;x=y\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n";
        let mut whole = chunked.to_vec();
        whole.extend_from_slice(b"GET http://b.test/ HTTP/1.1\r\n\r\n");
        let mut f = Framer::new(Body::Chunked);
        assert_eq!(f.feed(&whole), Ok(chunked.len()));
        assert!(f.done());
        // The same a byte at a time.
        let mut f = Framer::new(Body::Chunked);
        let mut taken = 0;
        for b in &whole {
            taken += f.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(taken, chunked.len());
        assert!(f.done());

        for broken in [
            &b"x\r\n"[..],
            b"5\r\nhelloXX",
            b"\r\n",
            b"5\nhello\r\n",
            b"fffffffffffffffff\r\n",
            b"1;ext\nX\r\n",
            b"0\r\nT: 1\n\r\n",
            b"0\r\nT: 1\r\r\n",
        ] {
            assert!(
                Framer::new(Body::Chunked).feed(broken).is_err(),
                "{}",
                String::from_utf8_lossy(broken)
            );
        }
        let long = format!("1;{}\r\n", "e".repeat(5000));
        assert!(Framer::new(Body::Chunked).feed(long.as_bytes()).is_err());
    }

    #[tokio::test]
    async fn the_host_gets_one_body_and_the_program_its_answer_then_the_end() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut program, client) = tokio::net::UnixStream::pair().unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut host, _) = l.accept().await.unwrap();
        let task = tokio::spawn(carry_one(
            Client::Unix(client),
            upstream,
            b"hel".to_vec(),
            Body::Length(5),
        ));
        program
            .write_all(b"loGET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n")
            .await
            .unwrap();
        let mut got = [0u8; 5];
        host.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello");
        host.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .unwrap();
        host.shutdown().await.unwrap();
        let mut answer = Vec::new();
        program.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        drop(program);
        task.await.unwrap();
        let mut rest = Vec::new();
        host.read_to_end(&mut rest).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&rest), "");
    }
}
