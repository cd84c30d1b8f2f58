import java.sql.*;
import org.postgresql.PGResultSetMetaData;

// What pgjdbc reads from a result's RowDescription past names and types: each column's
// table and column number, which its ResultSetMetaData resolves through pg_catalog
// (getTableName, getBaseColumnName, isNullable); then {call f(?)} and {? = call f(?)};
// then a view read with a placeholder, its metadata asked for before a value is bound.
public class JdbcResultProbe {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE r (id INT PRIMARY KEY, name STRING NOT NULL, score INT)");
                s.execute("INSERT INTO r VALUES (1, 'a', 5)");
            }
            try (PreparedStatement p = c.prepareStatement("SELECT name, score + 1 AS more, score, id FROM r WHERE id = ?")) {
                p.setInt(1, 1);
                try (ResultSet r = p.executeQuery()) {
                    ResultSetMetaData md = r.getMetaData();
                    PGResultSetMetaData pg = md.unwrap(PGResultSetMetaData.class);
                    for (int i = 1; i <= md.getColumnCount(); i++) {
                        System.out.println("column " + md.getColumnLabel(i) + " table '" + md.getTableName(i)
                            + "' base '" + pg.getBaseSchemaName(i) + "." + pg.getBaseTableName(i) + "." + pg.getBaseColumnName(i)
                            + "' nullable " + md.isNullable(i));
                    }
                }
            }
            try (CallableStatement call = c.prepareCall("{call upper(?)}")) {
                call.setString(1, "abc");
                try (ResultSet r = call.executeQuery()) {
                    r.next();
                    System.out.println("call result " + r.getString(1));
                }
            }
            try (CallableStatement call = c.prepareCall("{? = call upper(?)}")) {
                call.registerOutParameter(1, Types.VARCHAR);
                call.setString(2, "abc");
                call.execute();
                System.out.println("call " + call.getString(1));
            } catch (SQLException e) {
                System.out.println("call refused " + e.getSQLState() + " " + e.getMessage().split("\n")[0]);
            }
            try (Statement s = c.createStatement()) {
                s.execute("CREATE VIEW rv (k, label) AS SELECT id, name FROM r");
            }
            try (PreparedStatement p = c.prepareStatement("SELECT label, k FROM rv WHERE k > ?")) {
                // described before a value is bound: Parse and Describe of the statement
                ResultSetMetaData md = p.getMetaData();
                ParameterMetaData pm = p.getParameterMetaData();
                StringBuilder line = new StringBuilder("view");
                for (int i = 1; i <= md.getColumnCount(); i++) {
                    line.append(" ").append(md.getColumnLabel(i)).append(" ").append(md.getColumnTypeName(i));
                }
                System.out.println(line.append(" param ").append(pm.getParameterTypeName(1)));
                p.setInt(1, 0);
                try (ResultSet r = p.executeQuery()) {
                    r.next();
                    System.out.println("view row " + r.getString(1) + " " + r.getLong(2));
                }
            }
        }
    }
}
