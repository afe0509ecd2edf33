//! Who holds a TCP port, for the error of a `serve` whose port is taken: read from
//! Linux's /proc (the listening socket's inode, then the process with that socket
//! open). Elsewhere, or for another user's process, nothing is known.

use std::fs;

/// The process listening on TCP `port`, as `pid N (COMMAND LINE)`, if this user can see
/// it.
pub fn holder(port: u16) -> Option<String> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| fs::read_to_string(table).ok())
        .flat_map(|table| listening(&table, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for process in fs::read_dir("/proc").ok()?.flatten() {
        let name = process.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        });
        if holds {
            let command = fs::read(process.path().join("cmdline"))
                .map(|raw| {
                    let words: Vec<String> = raw
                        .split(|b| *b == 0)
                        .filter(|w| !w.is_empty())
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect();
                    words.join(" ")
                })
                .unwrap_or_default();
            let command: String = command.chars().take(200).collect();
            return Some(format!("pid {pid} ({command})"));
        }
    }
    None
}

/// The inodes of the sockets listening on `port` in a /proc/net/tcp table.
fn listening(table: &str, port: u16) -> Vec<String> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields.get(1)?.rsplit_once(':')?.1;
            let matches =
                u16::from_str_radix(local_port, 16).ok()? == port && *fields.get(3)? == LISTEN;
            matches.then(|| fields.get(9).map(|inode| (*inode).to_owned()))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_by_its_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:C383 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:C383 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1\n";
        assert_eq!(listening(table, 50051), vec!["4242".to_owned()]);
        assert!(listening(table, 50052).is_empty());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_named_as_the_holder_of_its_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let held = holder(port).expect("found");
        assert!(
            held.starts_with(&format!("pid {} (", std::process::id())),
            "{held}"
        );
    }
}
