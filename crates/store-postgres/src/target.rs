//! Naming a database for people: where a connection string points, without its password.

/// The host(s), port(s), database and user a connection string names (libpq's defaults
/// where it names none), never the password: for logs and for errors at start, e.g.
/// `host=127.0.0.1 port=5432 dbname=kafka user=broker`. A string that does not parse is
/// described as such, without repeating it (it may hold a password).
pub fn describe_target(url: &str) -> String {
    let config: tokio_postgres::Config = match url.parse() {
        Ok(c) => c,
        Err(e) => return format!("a connection string that does not parse: {e}"),
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost".to_string()
    } else {
        hosts.join(",")
    };
    let ports = config.get_ports();
    let ports = if ports.is_empty() {
        "5432".to_string()
    } else {
        ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let user = config.get_user().unwrap_or("(the OS user)");
    let dbname = config.get_dbname().unwrap_or(user);
    format!("host={hosts} port={ports} dbname={dbname} user={user}")
}

#[cfg(test)]
mod tests {
    use super::describe_target;

    #[test]
    fn names_host_port_database_and_user_but_never_the_password() {
        let d = describe_target("postgres://broker:s3cret@db.example:6543/kafka");
        assert_eq!(d, "host=db.example port=6543 dbname=kafka user=broker");
        let d = describe_target("host=/tmp/pg user=postgres password='s3cret x' dbname=k");
        assert_eq!(d, "host=/tmp/pg port=5432 dbname=k user=postgres");
        let d = describe_target("postgres://u:s3cret@h/");
        assert!(!d.contains("s3cret"), "{d}");
        let d = describe_target("postgres://u:s3cret@h:notaport/db");
        assert!(
            d.starts_with("a connection string that does not parse"),
            "{d}"
        );
        assert!(!d.contains("s3cret"), "{d}");
    }
}
