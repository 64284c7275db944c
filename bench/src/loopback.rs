//! The machine's loopback TCP bandwidth, measured in the same run as a
//! broker benchmark so that throughput can be given as a ratio of it: one
//! thread writes 1 MiB buffers to another over 127.0.0.1 for the duration.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// MB/s over loopback for `duration`.
pub fn measure(duration: Duration) -> std::io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    });
    let mut s = TcpStream::connect(addr)?;
    let buf = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < duration {
        s.write_all(&buf)?;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let total = reader.join().map_err(|_| std::io::Error::other("reader panicked"))??;
    Ok(total as f64 / start.elapsed().as_secs_f64() / 1e6)
}
