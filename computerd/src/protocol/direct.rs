//! `computerd stdio --direct`: how a provider whose only way in is an exec
//! (Docker) still reaches init over a socket of its own.
//!
//! The provider listens on a unix socket outside the computer, in a
//! directory bound into it read-only, and starts `computerd stdio --socket
//! <init's> --direct <that socket, as seen inside>`. It writes one token
//! line on the exec's stdin: [`TOKEN_HEX`] lower-case hex digits and `\n`.
//! The bridge reads exactly that line, connects to init, then to the
//! provider's socket, and sends the same line there as its first bytes.
//! It then says one byte on stdout:
//!
//! - [`SAID_DIRECT`]: the provider's socket is relayed to init; stdio
//!   carries nothing more (the provider may close it).
//! - [`SAID_STDIO`]: the provider's socket could not be reached (a Docker
//!   whose engine runs in a VM, a policy refusing the connection): stdin
//!   and stdout are bridged to init as without `--direct`.
//!
//! The provider takes only a connection whose first line is its token and
//! closes any other: the directory is the computer's own, but its programs
//! may connect to what is in it.

/// The token's length in hex digits (32 random bytes).
pub const TOKEN_HEX: usize = 64;
/// The token line's length: the digits and `\n`.
pub const TOKEN_LINE: usize = TOKEN_HEX + 1;
/// The bridge relays the provider's socket.
pub const SAID_DIRECT: u8 = b'D';
/// The bridge bridges stdio.
pub const SAID_STDIO: u8 = b'S';

/// Whether `line` is a token line: the digits and `\n`.
pub fn is_token_line(line: &[u8]) -> bool {
    line.len() == TOKEN_LINE
        && line[TOKEN_HEX] == b'\n'
        && line[..TOKEN_HEX]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// `a == b`, in time that does not depend on where they differ.
pub fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_line_is_64_hex_digits_and_a_newline() {
        let good = format!("{}\n", "0123456789abcdef".repeat(4));
        assert!(is_token_line(good.as_bytes()));
        assert!(!is_token_line(good.trim_end().as_bytes()));
        assert!(!is_token_line(good.to_uppercase().as_bytes()));
        let mut long = good.clone();
        long.insert(0, 'a');
        assert!(!is_token_line(long.as_bytes()));
        assert!(same_token(good.as_bytes(), good.as_bytes()));
        let mut other = good.into_bytes();
        other[63] = b'0';
        assert!(!same_token(
            &other,
            format!("{}\n", "0123456789abcdef".repeat(4)).as_bytes()
        ));
    }
}
