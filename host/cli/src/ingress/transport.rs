//! The ingress's listener: connections whose transport-level refusals are typed JSON too.
//!
//! hyper answers a request it cannot parse before any router sees it: 414 for a URI over
//! 65534 bytes, 431 for a header section over its buffer or header count, 400 for anything
//! that is not HTTP/1.1. It offers no hook for those answers and writes them with an empty
//! body. So each connection's stream is wrapped, and a write that is exactly one of those
//! bodiless answers is replaced by the same status with a typed body (the router's shape,
//! `code` `invalid-argument`) before it reaches the socket.
//!
//! Recognising the answer by its bytes is exact as long as no response body on the
//! connection contains `HTTP/1.1 `: a head hyper writes for the router always carries a
//! `content-type`, and JSON bodies cannot hold the raw CR LF the answer needs. The one body
//! that can is an actor's reply; the ask handler marks the connection
//! ([`Connection::note_reply`]) when a reply could be mistaken for one, and its writes then
//! pass through untouched.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What the ingress knows about one connection, shared by its handlers (as `ConnectInfo`)
/// and its stream.
#[derive(Clone, Default)]
pub struct Connection {
    /// A reply on this connection contained bytes that could pass for hyper's own answer.
    lookalike: Arc<AtomicBool>,
}

impl Connection {
    /// Records a reply body about to be written on this connection.
    pub(crate) fn note_reply(&self, body: &[u8]) {
        if memchr::memmem::find(body, b"HTTP/1.1 ").is_some() {
            // Relaxed: the reply reaches the stream through the response, after this store,
            // on the connection's own task.
            self.lookalike.store(true, Ordering::Relaxed);
        }
    }
}

impl Connected<IncomingStream<'_, Listener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Self {
        stream.io().conn.clone()
    }
}

/// A TCP listener whose connections are [`Stream`]s.
pub struct Listener(TcpListener);

impl Listener {
    /// Wraps a bound listener.
    pub fn new(l: TcpListener) -> Self {
        Self(l)
    }
}

impl axum::serve::Listener for Listener {
    type Io = Stream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // axum's own accept loop: it logs and backs off on errors.
        let (io, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (Stream::new(io, Connection::default()), addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection's stream: reads pass through; hyper's bodiless parse-error answer is
/// replaced by a typed one (see the module docs).
pub struct Stream<IO> {
    io: IO,
    conn: Connection,
    /// The typed answer being written in place of hyper's, and how much of it is out.
    answer: Option<(Vec<u8>, usize)>,
}

impl<IO> Stream<IO> {
    /// Wraps `io`, the stream of `conn`.
    pub fn new(io: IO, conn: Connection) -> Self {
        Self {
            io,
            conn,
            answer: None,
        }
    }

    /// The typed answer to write instead of `written`, when `written` is exactly one of
    /// hyper's parse-error answers on a connection whose replies cannot look like one.
    fn replacement(&self, written: &[u8]) -> Option<Vec<u8>> {
        if self.conn.lookalike.load(Ordering::Relaxed) {
            return None;
        }
        typed_answer(written)
    }
}

impl<IO: AsyncWrite + Unpin> Stream<IO> {
    /// Writes what is left of the typed answer.
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.answer {
            if *done == bytes.len() {
                self.answer = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `written` as answered by `answer`: reports it written, and starts on `answer`.
    fn substitute(
        &mut self,
        cx: &mut Context<'_>,
        written: usize,
        answer: Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        self.answer = Some((answer, 0));
        // Whatever does not go out now goes at the flush or shutdown that follows.
        if let Poll::Ready(Err(e)) = self.poll_answer(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(written))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Stream<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Stream<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx))?;
        if let Some(answer) = this.replacement(buf) {
            return this.substitute(cx, buf.len(), answer);
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx))?;
        // hyper's answer is a head alone: one buffer, whatever empty ones surround it.
        let mut filled = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (filled.next(), filled.next())
            && let Some(answer) = this.replacement(only)
        {
            return this.substitute(cx, only.len(), answer);
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// If `head` is exactly an answer hyper writes for a request it could not parse (status 400,
/// 414 or 431, and no header but `connection: close`, `content-length: 0` and `date`), the
/// same answer with a typed body.
fn typed_answer(head: &[u8]) -> Option<Vec<u8>> {
    let head = std::str::from_utf8(head).ok()?.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let message = match status_line.strip_prefix("HTTP/1.1 ")?.get(..4)? {
        "400 " => {
            "not a well-formed HTTP/1.1 request: its request line or a header could not be parsed"
        }
        "414 " => {
            "request URI too long for this server: an actor type is at most 64 bytes, a key and a msg_type at most 256"
        }
        "431 " => "request header section too large: too many headers, or too many bytes",
        _ => return None,
    };
    let (mut bodiless, mut date) = (false, None);
    for line in lines {
        match line.split_once(": ")? {
            ("connection", "close") => {}
            ("content-length", "0") => bodiless = true,
            ("date", _) => date = Some(line),
            _ => return None,
        }
    }
    if !bodiless {
        return None;
    }
    let body = super::refusal_json("invalid-argument", format!("INVALID_ARGUMENT: {message}"));
    let body = body.to_string();
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(date) = date {
        out.push_str(date);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const URI_TOO_LONG: &[u8] = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 03:52:58 GMT\r\n\r\n";

    /// Writes `parts` as one vectored write (and what it left, as hyper would) through a
    /// [`Stream`] over an in-memory pipe, and returns what came out the other end.
    async fn through(conn: Connection, parts: &[&[u8]]) -> String {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut s = Stream::new(a, conn);
        let slices: Vec<_> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
        let n = s.write_vectored(&slices).await.unwrap();
        s.write_all(&parts.concat()[n..]).await.unwrap();
        s.shutdown().await.unwrap();
        let mut out = String::new();
        b.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn hypers_bodiless_answer_gets_a_typed_body_and_keeps_its_status_and_date() {
        let out = through(Connection::default(), &[b"", URI_TOO_LONG, b""]).await;
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            head,
            format!(
                "HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\ndate: Wed, 02 Dec 2026 03:52:58 GMT",
                body.len()
            )
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["code"], "invalid-argument");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .starts_with("INVALID_ARGUMENT: request URI too long")
        );
    }

    #[tokio::test]
    async fn anything_else_passes_untouched() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        let ok = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        let before = [b"x", URI_TOO_LONG].concat();
        let after = [URI_TOO_LONG, b"x"].concat();
        for parts in [
            // A head the router answered: it has a content-type.
            &[&ours[..]][..],
            // Not a refusal.
            &[&ok[..]],
            // The answer's bytes beside other bytes: part of something else.
            &[&before[..]],
            &[&after[..]],
            &[URI_TOO_LONG, b"x"],
            &[&URI_TOO_LONG[..URI_TOO_LONG.len() - 2]],
        ] {
            let want: Vec<u8> = parts.concat();
            let out = through(Connection::default(), parts).await;
            assert_eq!(out.as_bytes(), want, "{parts:?}");
        }
    }

    #[tokio::test]
    async fn a_connection_whose_reply_looks_like_the_answer_passes_it_untouched() {
        let conn = Connection::default();
        conn.note_reply(b"{\"ok\":true}");
        assert_eq!(
            through(conn.clone(), &[URI_TOO_LONG]).await.as_bytes()[..],
            typed_answer(URI_TOO_LONG).unwrap()[..]
        );
        let mut reply = b"prefix ".to_vec();
        reply.extend_from_slice(URI_TOO_LONG);
        conn.note_reply(&reply);
        assert_eq!(
            through(conn, &[URI_TOO_LONG]).await.as_bytes(),
            URI_TOO_LONG
        );
    }
}
