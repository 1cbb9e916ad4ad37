//! Authentication: optional shared secrets a connection presents in HELLO.
//!
//! Token files hold one token per line, optionally named (`name:token`);
//! blank lines and `#` comments are ignored. A client token lets a connection
//! send requests; an admin token also lets it send admin requests (requests
//! that run on every shard, cluster changes, policies, audits, clock). With
//! no token files at all, every connection may do everything (the loopback
//! default). Secrets are never logged: only token names are.

use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Admin,
}

#[derive(Clone)]
struct Token {
    name: String,
    secret: Vec<u8>,
}

#[derive(Clone, Default)]
pub struct Auth {
    clients: Vec<Token>,
    admins: Vec<Token>,
}

impl Auth {
    /// The secret this node presents to its peers (slot moves, map
    /// pushes): the first admin token. Nodes of one cluster share them.
    pub fn peer_token(&self) -> Option<String> {
        self.admins
            .first()
            .map(|t| String::from_utf8_lossy(&t.secret).into_owned())
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field(
                "clients",
                &self.clients.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .field(
                "admins",
                &self.admins.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("reading token file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("token file {path} holds no token")]
    Empty { path: String },
}

fn load(path: &Path) -> Result<Vec<Token>, AuthError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let tokens: Vec<Token> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .enumerate()
        .map(|(i, line)| match line.split_once(':') {
            Some((name, secret)) if !name.is_empty() && !secret.is_empty() => Token {
                name: name.to_string(),
                secret: secret.as_bytes().to_vec(),
            },
            _ => Token {
                name: format!("token-{}", i + 1),
                secret: line.as_bytes().to_vec(),
            },
        })
        .collect();
    if tokens.is_empty() {
        return Err(AuthError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(tokens)
}

/// Compare secrets in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Auth {
    pub fn load(
        token_file: Option<&Path>,
        admin_token_file: Option<&Path>,
    ) -> Result<Auth, AuthError> {
        Ok(Auth {
            clients: token_file.map(load).transpose()?.unwrap_or_default(),
            admins: admin_token_file.map(load).transpose()?.unwrap_or_default(),
        })
    }

    /// Does a connection have to say HELLO with a token first?
    pub fn required(&self) -> bool {
        !self.clients.is_empty() || !self.admins.is_empty()
    }

    /// The role a presented token grants (and the token's name, for logs).
    pub fn check(&self, presented: &str) -> Option<(Role, &str)> {
        let p = presented.as_bytes();
        // Check every token so timing doesn't tell which list matched.
        let admin = self.admins.iter().find(|t| same_secret(&t.secret, p));
        let client = self.clients.iter().find(|t| same_secret(&t.secret, p));
        match (admin, client) {
            (Some(t), _) => Some((Role::Admin, &t.name)),
            (None, Some(t)) => Some((Role::Client, &t.name)),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_with_names_comments_and_roles() {
        let dir = tempfile::tempdir().unwrap();
        let clients = dir.path().join("clients");
        let admins = dir.path().join("admins");
        std::fs::write(&clients, "# tenants\nshop:s3cret\n\nplain-token\n").unwrap();
        std::fs::write(&admins, "ops:root-token\n").unwrap();
        let auth = Auth::load(Some(&clients), Some(&admins)).unwrap();
        assert!(auth.required());
        assert_eq!(auth.check("s3cret"), Some((Role::Client, "shop")));
        assert_eq!(auth.check("plain-token"), Some((Role::Client, "token-2")));
        assert_eq!(auth.check("root-token"), Some((Role::Admin, "ops")));
        assert_eq!(auth.check("s3cre"), None);
        assert_eq!(auth.check(""), None);
        assert!(
            !format!("{auth:?}").contains("s3cret"),
            "secrets never show in Debug"
        );
        std::fs::write(&clients, "# nothing\n").unwrap();
        assert!(Auth::load(Some(&clients), None).is_err());
        assert!(!Auth::default().required());
    }
}
