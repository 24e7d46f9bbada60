package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is the cluster's CA: it signs the API server's serving
// certificate and the client certificates of the identities.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// EC P-256 keys: generating them is instant, unlike RSA.
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

func newAuthority() (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "terraform-provider-k8s local CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// SelfSigned is a throwaway CA certificate named name and its key, in PEM,
// for tests that need a certificate that is not the cluster's.
func SelfSigned(name string) (certPEM, keyPEM string, err error) {
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	sn, err := serial()
	if err != nil {
		return "", "", err
	}
	template := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	return string(pemBlock("CERTIFICATE", der)), string(pemBlock("EC PRIVATE KEY", keyDER)), nil
}

// keyPair is a certificate and its key, PEM-encoded.
type keyPair struct{ cert, key []byte }

// serving issues the API server's certificate for loopback and the names
// in-cluster clients use.
func (a *authority) serving() (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
	})
}

// client issues a client certificate for user in groups.
func (a *authority) client(user string, groups ...string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) issue(template *x509.Certificate) (keyPair, error) {
	key, err := newKey()
	if err != nil {
		return keyPair{}, err
	}
	if template.SerialNumber, err = serial(); err != nil {
		return keyPair{}, err
	}
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().AddDate(1, 0, 0)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	template.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, template, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: pemBlock("CERTIFICATE", der), key: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// serviceAccountKeys is the pair that signs (controller manager, token
// requests) and verifies (API server) service account tokens.
func serviceAccountKeys() (private, public []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	privDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("EC PRIVATE KEY", privDER), pemBlock("PUBLIC KEY", pubDER), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// writeFiles writes name -> content under dir, readable by the owner only.
func writeFiles(dir string, files map[string][]byte) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return err
		}
	}
	return nil
}
