//! Reading a file off the async workers: a file of the largest size takes seconds of
//! CPU, which on a worker would hold every acquire queued behind it. One file is read at
//! a time per process, so that files posted at once take one core, not all of them, and
//! the memory of one reading.

use tokio::sync::Semaphore;

use super::caps::Caps;
use super::parse::{FileErrors, PolicyFile, parse_file_within};

/// One reading at a time.
static READING: Semaphore = Semaphore::const_new(1);

/// [`parse_file_within`] on a blocking thread, after the files read before it.
pub async fn parse_off_thread(
    text: String,
    caps: Caps,
) -> anyhow::Result<Result<PolicyFile, FileErrors>> {
    let _turn = READING.acquire().await?;
    let read = tokio::task::spawn_blocking(move || parse_file_within(&text, caps)).await?;
    Ok(read)
}
