//! A container's log as the logs pane shows it (`L` on a pod): asked for by the person,
//! streamed from the API server (`pods/log`, no kubectl needed), kept to the last
//! [`KEEP_LINES`] lines. Each request has a number; a stream's chunks carry it, so chunks of a
//! request the person has moved on from are dropped.

use std::collections::VecDeque;

use super::Ts;

/// The lines a log keeps (the oldest go first) and the most a request asks for.
pub const KEEP_LINES: usize = 10_000;
/// ...and the bytes: a log of long lines keeps fewer of them.
pub const KEEP_BYTES: usize = 16 << 20;
/// A line longer than this is cut into pieces of this size, as container runtimes cut
/// partial lines (CRI: 16 KiB), so one line without a newline cannot grow without bound.
pub const MAX_LINE: usize = 16 << 10;

/// Which log, and how to read it: as `kubectl logs` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRequest {
    /// Numbered by the cockpit; only the last request's lines are kept.
    pub id: u64,
    pub namespace: String,
    pub pod: String,
    /// `None`: the pod's default container (its `kubectl.kubernetes.io/default-container`
    /// annotation, else the first), as kubectl picks it.
    pub container: Option<String>,
    /// The container's previous (terminated) run.
    pub previous: bool,
    /// Keep the stream open and add lines as the container writes them.
    pub follow: bool,
    /// The kubelet's RFC 3339 time in front of each line.
    pub timestamps: bool,
    /// The last this many lines (`tailLines`); at most [`KEEP_LINES`].
    pub tail: Option<usize>,
}

impl LogRequest {
    /// A new request for the pod: the default container, following, the last lines.
    pub fn new(id: u64, namespace: &str, pod: &str) -> Self {
        Self {
            id,
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            container: None,
            previous: false,
            follow: true,
            timestamps: false,
            tail: Some(KEEP_LINES),
        }
    }
    /// `pod/ns/name [container]`.
    pub fn label(&self) -> String {
        let c = self.container.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
        format!("logs pod/{}/{}{c}", self.namespace, self.pod)
    }
}

/// What a stream reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEvent {
    /// The stream opened: the pod's containers (regular, then init), and the one read.
    Opened { containers: Vec<String>, container: String },
    /// Lines the container wrote (without their newlines).
    Lines(Vec<String>),
    /// The stream ended: `None` as it should (not following, or the container stopped),
    /// `Some` with what the API server said.
    Ended(Option<String>),
}

/// Where a log's stream is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogState {
    Opening,
    Streaming,
    Ended,
    Failed(String),
}

/// The log of the last request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogBuffer {
    pub request: u64,
    pub containers: Vec<String>,
    /// The container read (as the API server resolved the default).
    pub container: String,
    pub lines: VecDeque<String>,
    /// The bytes of `lines`.
    pub bytes: usize,
    /// Lines dropped off the front to stay within [`KEEP_LINES`] and [`KEEP_BYTES`].
    pub dropped: u64,
    pub state: LogState,
    /// When the last chunk arrived.
    pub at: Ts,
}

impl LogBuffer {
    pub fn new(request: u64, at: Ts) -> Self {
        Self {
            request,
            containers: Vec::new(),
            container: String::new(),
            lines: VecDeque::new(),
            bytes: 0,
            dropped: 0,
            state: LogState::Opening,
            at,
        }
    }

    /// Takes one event of its request's stream; whether anything changed.
    pub fn apply(&mut self, event: LogEvent, at: Ts) -> bool {
        self.at = at;
        match event {
            LogEvent::Opened { containers, container } => {
                self.containers = containers;
                self.container = container;
                self.state = LogState::Streaming;
            }
            LogEvent::Lines(lines) => {
                if lines.is_empty() {
                    return false;
                }
                self.bytes += lines.iter().map(String::len).sum::<usize>();
                self.lines.extend(lines);
                while self.lines.len() > KEEP_LINES || self.bytes > KEEP_BYTES {
                    let Some(old) = self.lines.pop_front() else { break };
                    self.bytes -= old.len();
                    self.dropped += 1;
                }
            }
            LogEvent::Ended(None) => self.state = LogState::Ended,
            LogEvent::Ended(Some(e)) => self.state = LogState::Failed(e),
        }
        true
    }
}

/// Splits a chunk of a stream into whole lines: `carry` holds a line the chunk did not end,
/// and takes this chunk's unfinished last line. Bytes that are not UTF-8 become U+FFFD.
/// A line over [`MAX_LINE`] bytes comes out in pieces of that size.
pub fn split_lines(carry: &mut Vec<u8>, chunk: &[u8]) -> Vec<String> {
    carry.extend_from_slice(chunk);
    let mut out = Vec::new();
    let mut start = 0;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    while let Some(k) = carry[start..].iter().position(|b| *b == b'\n') {
        let line = &carry[start..start + k];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        out.extend(line.chunks(MAX_LINE).map(text));
        if line.is_empty() {
            out.push(String::new());
        }
        start += k + 1;
    }
    // An unfinished line that is already too long: its full pieces go now.
    let full = (carry.len() - start) / MAX_LINE * MAX_LINE;
    out.extend(carry[start..start + full].chunks(MAX_LINE).map(text));
    carry.drain(..start + full);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_keeps_the_last_lines_and_counts_the_dropped() {
        let mut b = LogBuffer::new(1, 0);
        assert!(b.apply(LogEvent::Opened { containers: vec!["a".into(), "b".into()], container: "a".into() }, 1));
        assert_eq!(b.state, LogState::Streaming);
        for k in 0..3 {
            let chunk: Vec<String> = (0..KEEP_LINES / 2 + 1).map(|i| format!("{k}-{i}")).collect();
            b.apply(LogEvent::Lines(chunk), 2);
        }
        assert_eq!(b.lines.len(), KEEP_LINES);
        assert_eq!(b.dropped, 3 * (KEEP_LINES as u64 / 2 + 1) - KEEP_LINES as u64);
        assert_eq!(b.lines.back().map(String::as_str), Some(format!("2-{}", KEEP_LINES / 2).as_str()));
        assert!(!b.apply(LogEvent::Lines(Vec::new()), 3));
        b.apply(LogEvent::Ended(Some("pods \"x\" not found".into())), 4);
        assert_eq!(b.state, LogState::Failed("pods \"x\" not found".into()));
    }

    #[test]
    fn chunks_split_into_whole_lines() {
        let mut carry = Vec::new();
        assert_eq!(split_lines(&mut carry, b"one\ntw"), vec!["one"]);
        assert_eq!(split_lines(&mut carry, b"o"), Vec::<String>::new());
        assert_eq!(split_lines(&mut carry, b"\r\nthree\n\nfour"), vec!["two", "three", ""]);
        assert_eq!(carry, b"four");
        assert_eq!(split_lines(&mut carry, b"\xff\n"), vec!["four\u{fffd}"]);
        assert!(carry.is_empty());
        // A line without end is cut at MAX_LINE; the rest waits for more.
        let long = vec![b'a'; MAX_LINE * 2 + 5];
        let got = split_lines(&mut carry, &long);
        assert_eq!(got.iter().map(String::len).collect::<Vec<_>>(), vec![MAX_LINE, MAX_LINE]);
        assert_eq!(carry.len(), 5);
        assert_eq!(split_lines(&mut carry, b"b\n"), vec!["aaaaab"]);
    }

    #[test]
    fn a_buffer_of_long_lines_keeps_at_most_keep_bytes() {
        let mut b = LogBuffer::new(1, 0);
        let line = "x".repeat(MAX_LINE);
        for _ in 0..3 {
            b.apply(LogEvent::Lines(vec![line.clone(); KEEP_BYTES / MAX_LINE / 2 + 1]), 0);
        }
        assert!(b.bytes <= KEEP_BYTES && b.bytes == b.lines.iter().map(String::len).sum::<usize>());
        assert_eq!(b.lines.len(), KEEP_BYTES / MAX_LINE);
        assert!(b.dropped > 0);
    }
}
