//! TLS for SSL and SASL_SSL listeners (rustls): the server configuration read from PEM files,
//! the stream a connection reads and writes (plain TCP or TLS), and the principal of a client
//! certificate as Kafka's default principal builder names it.

use std::fmt;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::SslClientAuth;
use crate::error::BrokerError;

/// The TLS side of the SSL and SASL_SSL listeners, built once at start.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) acceptor: TlsAcceptor,
    /// Whether clients are asked for a certificate, and must present one.
    pub(crate) client_auth: SslClientAuth,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("client_auth", &self.client_auth)
            .finish_non_exhaustive()
    }
}

fn invalid(setting: &'static str, path: &Path, what: impl fmt::Display) -> BrokerError {
    BrokerError::InvalidConfig {
        setting,
        reason: format!("`{}`: {what}", path.display()),
    }
}

/// Every certificate of a PEM file; none is an error.
fn certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, BrokerError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(setting, path, pem_error(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(setting, path, pem_error(&e)))?;
    if certs.is_empty() {
        return Err(invalid(setting, path, "no CERTIFICATE in this PEM file"));
    }
    Ok(certs)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) => format!("cannot read it: {io}"),
        other => format!("not a valid PEM file: {other:?}"),
    }
}

impl Tls {
    /// Reads the certificate chain, its key and, for client authentication, the authorities
    /// client certificates must chain to. TLS 1.2 and 1.3, rustls's safe cipher suites.
    /// `client_auth` says whether a certificate is asked for (`requested`: checked when
    /// presented, a client may come without) and required; it is `none` without `client_ca`.
    ///
    /// # Errors
    /// `INVALID_CONFIG` naming the setting and the file: unreadable, not PEM, no certificate
    /// or key in it, or a key that does not match the certificate.
    pub(crate) fn from_files(
        certificate: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        client_auth: SslClientAuth,
    ) -> Result<Tls, BrokerError> {
        let client_ca = client_ca.filter(|_| client_auth != SslClientAuth::None);
        let chain = certificates("ssl-certificate", certificate)?;
        let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
            invalid(
                "ssl-key",
                key,
                match e {
                    rustls::pki_types::pem::Error::NoItemsFound => {
                        "no PRIVATE KEY (PKCS#8), RSA PRIVATE KEY or EC PRIVATE KEY in this PEM file"
                            .to_string()
                    }
                    other => pem_error(&other),
                },
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("ssl-certificate", certificate, e))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates("ssl-client-ca", ca)? {
                    roots.add(cert).map_err(|e| {
                        invalid(
                            "ssl-client-ca",
                            ca,
                            format!("a certificate is not usable as an authority: {e}"),
                        )
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if client_auth == SslClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| invalid("ssl-client-ca", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_single_cert(chain, private_key).map_err(|e| {
            invalid(
                "ssl-key",
                key,
                format!("does not go with --ssl-certificate: {e}"),
            )
        })?;
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            client_auth: if client_ca.is_some() {
                client_auth
            } else {
                SslClientAuth::None
            },
        })
    }
}

/// A connection's byte stream: plain TCP, or TLS over it (boxed: a TLS session's buffers
/// would make every plain connection as large).
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The principal of the client certificate a TLS connection presented: `User:` and its
    /// subject as RFC 2253 writes it (Kafka's `DefaultKafkaPrincipalBuilder` with the default
    /// `ssl.principal.mapping.rules`: `X500Principal.getName()`), e.g. `User:CN=app,O=acme`.
    /// `None` for plain TCP, or without a certificate.
    pub(crate) fn peer_principal(&self) -> Option<String> {
        let Stream::Tls(tls) = self else {
            return None;
        };
        let cert = tls.get_ref().1.peer_certificates()?.first()?;
        principal_of_certificate(cert.as_ref())
    }
}

/// `User:` and the subject of a DER certificate in RFC 2253 form; `None` if it does not parse
/// (rustls has verified it, so it does).
pub(crate) fn principal_of_certificate(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(format!("User:{}", rfc2253(cert.subject())))
}

/// A distinguished name as RFC 2253 writes it (and Java's `X500Principal.getName()`): the
/// RDNs from the last to the first, `,` between them, `+` between the attributes of one;
/// the attribute types RFC 2253 names by keyword, others by dotted OID with the value's DER
/// in hex (`1.2.3=#0c03616263`); special characters escaped with `\`.
fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    use x509_parser::oid_registry as oids;
    let keyword = |oid: &x509_parser::der_parser::oid::Oid<'_>| -> Option<&'static str> {
        [
            (oids::OID_X509_COMMON_NAME, "CN"),
            (oids::OID_X509_COUNTRY_NAME, "C"),
            (oids::OID_X509_LOCALITY_NAME, "L"),
            (oids::OID_X509_STATE_OR_PROVINCE_NAME, "ST"),
            (oids::OID_X509_ORGANIZATION_NAME, "O"),
            (oids::OID_X509_ORGANIZATIONAL_UNIT, "OU"),
            (oids::OID_X509_STREET_ADDRESS, "STREET"),
            (oids::OID_DOMAIN_COMPONENT, "DC"),
            (oids::OID_USERID, "UID"),
        ]
        .into_iter()
        .find(|(o, _)| o == oid)
        .map(|(_, k)| k)
    };
    let mut out = String::new();
    for (i, rdn) in name
        .iter()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        for (j, attr) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let value = attr
                .as_str()
                .ok()
                .filter(|_| keyword(attr.attr_type()).is_some());
            match (keyword(attr.attr_type()), value) {
                (Some(k), Some(v)) => {
                    out.push_str(k);
                    out.push('=');
                    escape_into(&mut out, v);
                }
                _ => {
                    use std::fmt::Write as _;
                    use x509_parser::asn1_rs::ToDer as _;
                    out.push_str(&attr.attr_type().to_id_string());
                    out.push_str("=#");
                    for b in attr.attr_value().to_der_vec().unwrap_or_default() {
                        let _ = write!(out, "{b:02x}");
                    }
                }
            }
        }
    }
    out
}

/// RFC 2253 §2.4: `,` `+` `"` `\` `<` `>` `;` escaped anywhere, `#` and a space at the start
/// and a space at the end.
fn escape_into(out: &mut String, value: &str) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with_subject(dn: rcgen::DistinguishedName) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_client_certificate_names_its_principal_as_kafka_does() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "eng");
        dn.push(rcgen::DnType::CommonName, "orders-app");
        assert_eq!(
            principal_of_certificate(&cert_with_subject(dn)).as_deref(),
            // the last RDN first, the comma in a value escaped (X500Principal.getName())
            Some("User:CN=orders-app,OU=eng,O=Acme\\, Inc.,C=DE")
        );
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, " #lead+trail ");
        assert_eq!(
            principal_of_certificate(&cert_with_subject(dn)).as_deref(),
            Some("User:CN=\\ #lead\\+trail\\ ")
        );
        assert_eq!(principal_of_certificate(b"not a certificate"), None);
    }
}
