//! CPU time from /proc: of one process (user + system, `/proc/<pid>/stat`) and of the whole
//! machine (`/proc/stat`), in clock ticks, read before and after each wrk run.

use std::time::Duration;

use crate::procs;

/// Clock ticks per second (`getconf CLK_TCK`; 100 if it cannot say).
pub async fn clock_ticks_per_second() -> f64 {
    procs::run(
        procs::command("getconf", ["CLK_TCK"]),
        Duration::from_secs(5),
    )
    .await
    .ok()
    .and_then(|out| out.stdout.trim().parse().ok())
    .unwrap_or(100.0)
}

/// CPU time a process has used so far: fields 14 and 15 of its stat, that is the 12th and
/// 13th after the command name in parentheses (which may hold spaces); `None` once gone.
pub fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU time the machine's cores have worked so far, whoever ran: user, nice, system, irq
/// and softirq of /proc/stat's first line (guest time is inside user; idle, iowait and the
/// time the hypervisor gave to others, steal, are not work done here).
pub fn machine_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user, nice, system, then idle and iowait (not counted), then irq, softirq.
    let worked = [0, 1, 2, 5, 6].map(|i| v.get(i).copied());
    worked.into_iter().sum()
}

/// µs of CPU per request between two readings.
pub fn per_request(
    before: Option<u64>,
    after: Option<u64>,
    requests: Option<u64>,
    hz: f64,
) -> Option<f64> {
    let (before, after, requests) = (before?, after?, requests?);
    (requests > 0 && after >= before).then(|| (after - before) as f64 * 1e6 / hz / requests as f64)
}

/// The server's memory from /proc/<pid>/status: VmRSS (resident now) and VmHWM (the peak
/// so far), in kB as /proc gives them.
pub fn memory_kb(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, None);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_request_divides_the_ticks_by_the_requests() {
        assert_eq!(
            per_request(Some(100), Some(150), Some(10_000), 100.0),
            Some(50.0)
        );
        assert_eq!(per_request(Some(100), None, Some(10), 100.0), None);
        assert_eq!(per_request(Some(1), Some(2), Some(0), 100.0), None);
    }

    #[test]
    fn this_process_has_a_cpu_time_and_a_memory() {
        assert!(process_ticks(std::process::id()).is_some());
        assert!(machine_ticks().is_some());
        let (rss, hwm) = memory_kb(std::process::id());
        assert!(rss.is_some() && hwm.is_some());
    }
}
